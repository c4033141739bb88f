"""A ``module:factory`` backend that writes to stdout and stderr, then fails (for the tests
that check node output reaches the report). Node processes import it by name."""

from __future__ import annotations

import os
import sys
from typing import Any


class _Noisy:
    def __init__(self, params: Any) -> None:
        self.rank = int(params.config["rank"])

    def next_rendezvous(self) -> Any:
        print(f"noisy rank {self.rank} says hello on stdout", flush=True)
        os.write(2, f"noisy rank {self.rank} writes to fd 2 directly\n".encode())
        sys.stderr.write(f"noisy rank {self.rank} gives up\n")
        raise RuntimeError(f"noisy rank {self.rank} refuses to rendezvous")

    def shutdown(self) -> bool:
        return True


def noisy(params: Any) -> _Noisy:
    """A handler that talks, then raises."""
    return _Noisy(params)

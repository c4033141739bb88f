"""A job's worker: run by torch's agent as a script (``python -u worker.py [SCRIPT ARGS...]``).

1. It ends with its agent: torch starts each worker in a session of its own, so the worker
   asks the kernel for SIGKILL when its parent dies (``PR_SET_PDEATHSIG``), then checks that
   its parent is still the agent that started it (``HARNESS_JOB_AGENT``: its PID).
2. It reports its stages to the node (``HARNESS_JOB_REPORT``: the path of the node's
   datagram socket; one JSON object per datagram: local rank, stage, time, fields):
   ``pg_ready`` when ``init_process_group`` returns, ``collective_done`` when an
   ``all_reduce`` returns, ``worker_failed`` when the script raises.
3. Without a script it runs the default job: ``init_process_group("gloo")``, one
   all-reduce of ``rank + 1``. With one (a user's), it wraps torch's
   ``init_process_group`` and ``all_reduce`` to report the same stages, and runs it as
   ``__main__``.

Standard library only at the top: torch is imported after the death signal is set.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import socket
import sys
import time
from datetime import timedelta
from typing import Any

_PR_SET_PDEATHSIG = 1


def _end_with_agent() -> None:
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    agent = os.environ.get("HARNESS_JOB_AGENT")
    if agent is not None and os.getppid() != int(agent):  # it died before the prctl
        os._exit(1)


class _Reporter:
    def __init__(self) -> None:
        self.path = os.environ.get("HARNESS_JOB_REPORT")
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) if self.path else None

    def __call__(self, stage: str, **fields: Any) -> None:
        if self.sock is None or self.path is None:
            return
        data = {"local_rank": self.local_rank, "stage": stage, "t": time.monotonic(), **fields}
        with contextlib.suppress(OSError):  # the node is gone: nobody to tell
            self.sock.sendto(json.dumps(data).encode(), self.path)


def _env_int(name: str) -> int | None:
    value = os.environ.get(name)
    return int(value) if value is not None else None


def _wrap(dist: Any, report: _Reporter) -> None:
    """Report ``pg_ready`` and ``collective_done`` from torch's own calls."""
    init, all_reduce = dist.init_process_group, dist.all_reduce

    def init_process_group(*args: Any, **kwargs: Any) -> Any:
        if "timeout" not in kwargs and os.environ.get("HARNESS_JOB_PG_TIMEOUT"):
            kwargs["timeout"] = timedelta(seconds=float(os.environ["HARNESS_JOB_PG_TIMEOUT"]))
        done = init(*args, **kwargs)
        report(
            "pg_ready",
            rank=dist.get_rank(),
            world_size=dist.get_world_size(),
            restart=_env_int("TORCHELASTIC_RESTART_COUNT"),
            master=f"{os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')}",
        )
        return done

    def all_reduce_(tensor: Any, *args: Any, **kwargs: Any) -> Any:
        done = all_reduce(tensor, *args, **kwargs)
        value = tensor.flatten()[0].item() if tensor.numel() else None
        report("collective_done", result=value)
        return done

    dist.init_process_group = init_process_group
    dist.all_reduce = all_reduce_


def _default(dist: Any) -> None:
    import torch

    dist.init_process_group("gloo")
    value = torch.tensor([float(dist.get_rank() + 1)])
    dist.all_reduce(value)
    dist.destroy_process_group()


def main(argv: list[str]) -> int:
    _end_with_agent()
    report = _Reporter()
    try:
        import torch.distributed as dist

        _wrap(dist, report)
        if argv:
            import runpy

            sys.argv = list(argv)
            runpy.run_path(argv[0], run_name="__main__")
        else:
            _default(dist)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if code:
            report("worker_failed", message=f"exited {code}", error_class="SystemExit")
        return code
    except BaseException as exc:
        qualified = f"{type(exc).__module__}.{type(exc).__qualname__}"
        report("worker_failed", message=str(exc)[:2000], error_class=qualified)
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The Ray the harness runs on: join a cluster, or start a local one bound to 127.0.0.1.

Ray is an optional extra (``pip install '.[ray]'``): :func:`unavailable` says why the Ray
world cannot run here, with the install command, and nothing imports Ray before a Ray world
is wanted. :func:`ray_session` is what ``harness run --world ray`` and the pytest plugin
wrap a whole suite in, so Ray starts once, not per scenario:

* with an address (``ray start --head`` printed it; ``auto`` finds a cluster started on
  this machine), it joins that cluster and leaves it running at the end;
* without one, it starts a local Ray bound to 127.0.0.1 (``address="local"``: never a
  dead cluster's leftover address file), and shuts it down at the end, also on Ctrl-C;
* when Ray is already initialised in this process (a test session's fixture), it uses
  that and leaves it alone.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

from harness.errors import HarnessError

__all__ = ["INSTALL", "LOCAL_ADDRESS", "RaySession", "connect", "ray_session", "unavailable"]

#: How to install what the Ray world needs.
INSTALL: Final = "pip install '.[ray]' (or pip install 'ray>=2.9')"
#: The address a local Ray binds to: traffic stays on this machine.
LOCAL_ADDRESS: Final = "127.0.0.1"
_CLUSTERS_ENV: Final = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
#: The namespace of the harness's actors in a Ray it starts.
NAMESPACE: Final = "harness"


def unavailable() -> str | None:
    """Why the Ray world cannot run here (Ray is not installed), or None when it can."""
    spec = importlib.util.find_spec("ray")
    if spec is None or spec.origin is None:  # no origin: a bare folder named ray, not Ray
        return f"the ray world needs Ray, which is not installed: {INSTALL}"
    return None


@dataclass
class RaySession:
    """A connection to Ray made by :func:`connect`.

    Attributes:
        address: the cluster's address (None: a local Ray started here).
        owned: this session started Ray (or connected this process) and ends it on close.
    """

    address: str | None
    owned: bool

    def close(self) -> None:
        """Disconnect (and stop a local Ray this session started); idempotent."""
        if self.owned:
            import ray

            self.owned = False
            ray.shutdown()


def connect(address: str | None = None, num_cpus: int | None = None) -> RaySession:
    """Join the Ray cluster at ``address``, or start a local Ray bound to 127.0.0.1.

    A Ray already initialised in this process is used as it is (and left running).

    Args:
        address: a running cluster's address (``host:port``, ``ray://...`` or ``auto``);
            None starts a local Ray.
        num_cpus: the CPUs a local Ray offers (default: this machine's count).

    Raises:
        UnsupportedError: Ray is not installed.
        HarnessError: Ray could not be started, or the cluster could not be joined.
    """
    why = unavailable()
    if why is not None:
        from harness.errors import UnsupportedError

        raise UnsupportedError(why, world="ray", capability="ray")
    import ray

    init: Any = ray.init  # typed or not, depending on the Ray installed
    if ray.is_initialized():
        return RaySession(address, owned=False)
    quiet = {"log_to_driver": False, "logging_level": logging.WARNING}
    try:
        if address is not None:
            init(address=address, namespace=NAMESPACE, **quiet)
        else:
            with _on_loopback():
                init(
                    address="local",
                    num_cpus=num_cpus or os.cpu_count() or 2,
                    include_dashboard=False,
                    namespace=NAMESPACE,
                    _node_ip_address=LOCAL_ADDRESS,
                    **quiet,
                )
    except Exception as exc:
        with contextlib.suppress(Exception):
            ray.shutdown()
        where = f"join the Ray cluster at {address!r}" if address else "start a local Ray"
        hint = (
            " (is `ray start --head` running there, and the same Ray version installed here?)"
            if address
            else ""
        )
        raise HarnessError(f"the harness could not {where}: {exc}{hint}") from exc
    return RaySession(address, owned=True)


@contextlib.contextmanager
def _on_loopback() -> Iterator[None]:
    """While a local Ray starts: bind it to 127.0.0.1 for real.

    Ray turns a loopback ``node_ip_address`` into the machine's own address unless Ray
    "clusters" are switched off (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, read by Ray's
    processes from the environment and by this one at import): both are set for the start
    (the raylet and its workers inherit the environment), then put back.
    """
    from ray._private import ray_constants

    saved_env = os.environ.get(_CLUSTERS_ENV)
    saved = ray_constants.ENABLE_RAY_CLUSTER
    os.environ[_CLUSTERS_ENV] = "0"
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = saved
        if saved_env is None:
            os.environ.pop(_CLUSTERS_ENV, None)
        else:
            os.environ[_CLUSTERS_ENV] = saved_env


@contextlib.contextmanager
def ray_session(address: str | None = None) -> Iterator[RaySession]:
    """:func:`connect` for the duration of a ``with`` block; closed at its end, also when
    it ends by an exception (Ctrl-C included). Raises what :func:`connect` raises."""
    session = connect(address)
    try:
        yield session
    finally:
        session.close()

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

Ctrl-C while Ray starts or stops: ``ray.init`` and ``ray.shutdown`` run in the main thread
for seconds, and a ``KeyboardInterrupt`` raised somewhere inside them leaves Ray half made
(a local Ray's agents outlive the harness; the interpreter may crash at exit while Ray's
threads run). So while they run, a SIGINT is only noted (:func:`_sigint_noted`); a Ctrl-C
noted during ``ray.init`` stops the Ray just started and is then raised as the
``KeyboardInterrupt`` it was, within a moment of ``ray.init`` returning; one noted during
``ray.shutdown`` is dropped (the harness is ending: the Ray it started still goes away).
A local Ray's processes that outlive ``ray.shutdown`` for seconds are killed by PID.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

import psutil

from harness.errors import HarnessError
from harness.world.ray.steps import announce

__all__ = ["INSTALL", "LOCAL_ADDRESS", "RaySession", "connect", "ray_session", "unavailable"]

#: How to install what the Ray world needs.
INSTALL: Final = "pip install '.[ray]' (or pip install 'ray>=2.9')"
#: The address a local Ray binds to: traffic stays on this machine.
LOCAL_ADDRESS: Final = "127.0.0.1"
_CLUSTERS_ENV: Final = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
#: The namespace of the harness's actors in a Ray it starts.
NAMESPACE: Final = "harness"
#: Seconds for a local Ray's processes to end after ``ray.shutdown`` (then: killed).
_GONE_WAIT: Final = 10.0
#: In the command line of every process of a local Ray but its workers (``ray::...``).
_RAY_PATH: Final = f"{os.sep}ray{os.sep}"
#: What Ray (2.5x) logs as a warning on every start of a local Ray that leaves
#: ``RAY_AUTH_MODE`` unset: that it turned its default, token authentication, on. The
#: harness keeps that default (setting the variable itself once Ray is imported leaves Ray's
#: own configuration behind it, and the driver is then refused), so the notice says nothing
#: a run should act on; it is dropped while the harness starts its local Ray.
_TOKEN_LOGGER: Final = "ray._private.authentication.authentication_token_setup"
_TOKEN_NOTICE: Final = "Token authentication is enabled for this Ray cluster"


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
            with _sigint_noted():  # a Ctrl-C now must not leave Ray half stopped
                if self.address is None:
                    _stop_local()
                else:
                    ray.shutdown()  # leave the cluster; it goes on running


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
        KeyboardInterrupt: Ctrl-C while Ray started (in the main thread): raised once
            ``ray.init`` returned and the Ray it started (if any) was stopped.
    """
    why = unavailable()
    if why is not None:
        from harness.errors import UnsupportedError

        raise UnsupportedError(why, world="ray", capability="ray")
    import ray

    if ray.is_initialized():
        return RaySession(address, owned=False)
    with _sigint_noted() as ctrl_c:
        announce("ray-init")
        try:
            _init(address, num_cpus)
        except Exception as exc:
            with contextlib.suppress(Exception):
                _stop_local() if address is None else ray.shutdown()
            ctrl_c.deliver()  # a Ctrl-C first: the user asked to stop
            where = f"join the Ray cluster at {address!r}" if address else "start a local Ray"
            hint = (
                " (is `ray start --head` running there, and the same Ray version installed here?)"
                if address
                else ""
            )
            raise HarnessError(f"the harness could not {where}: {exc}{hint}") from exc
        if ctrl_c:
            _stop_local() if address is None else ray.shutdown()
        ctrl_c.deliver()  # the Ctrl-C, now that nothing of Ray is left half made
    announce("ray-up")
    return RaySession(address, owned=True)


def _init(address: str | None, num_cpus: int | None) -> None:
    """``ray.init``: join ``address``, or start a local Ray bound to 127.0.0.1."""
    import ray

    init: Any = ray.init  # typed or not, depending on the Ray installed
    quiet = {"log_to_driver": False, "logging_level": logging.WARNING}
    if address is not None:
        init(address=address, namespace=NAMESPACE, **quiet)
        return
    with _on_loopback(), _token_notice_dropped():
        init(
            address="local",
            num_cpus=num_cpus or os.cpu_count() or 2,
            include_dashboard=False,
            namespace=NAMESPACE,
            _node_ip_address=LOCAL_ADDRESS,
            **quiet,
        )


def _stop_local() -> None:
    """``ray.shutdown`` of the local Ray this process started, then its processes are gone.

    ``ray.shutdown`` ends the raylet and the GCS, but the agents the raylet started
    (``ray::RuntimeEnvAgent``, ``ray::DashboardAgent``) end on their own once they notice,
    which on a loaded machine took over a minute: those still there after
    :data:`_GONE_WAIT` seconds are killed, by PID (this process's descendants that are
    Ray's, found before the shutdown).
    """
    import ray

    started = _ray_descendants()
    ray.shutdown()
    _, alive = psutil.wait_procs(started, timeout=_GONE_WAIT)
    for proc in alive:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(alive, timeout=_GONE_WAIT)


def _ray_descendants() -> list[psutil.Process]:
    """This process's descendants that are Ray's (its binaries, scripts and workers)."""
    found = []
    for proc in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            command = proc.cmdline()
            if proc.name().startswith("ray::") or any(_RAY_PATH in part for part in command):
                found.append(proc)
    return found


class _Noted:
    """The SIGINTs noted while Ray started or stopped, and the handler they were meant for."""

    def __init__(self, handler: Any) -> None:
        self.handler = handler
        self.count = 0

    def __bool__(self) -> bool:
        return self.count > 0

    def note(self, signum: int, frame: Any) -> None:
        self.count += 1

    def deliver(self) -> None:
        """Hand a noted SIGINT to its handler, once (the default one raises
        KeyboardInterrupt); nothing if none was noted."""
        if not self.count:
            return
        self.count = 0
        if callable(self.handler):
            self.handler(signal.SIGINT, None)
        elif self.handler != signal.SIG_IGN:
            raise KeyboardInterrupt


@contextlib.contextmanager
def _sigint_noted() -> Iterator[_Noted]:
    """While Ray starts or stops (in the main thread): a SIGINT is only noted, never raised
    inside Ray's code; the caller delivers it (:meth:`_Noted.deliver`) when Ray is in a state
    it can be left in. In another thread nothing changes: a SIGINT is the main thread's."""
    if threading.current_thread() is not threading.main_thread():
        yield _Noted(None)
        return
    noted = _Noted(signal.getsignal(signal.SIGINT))
    signal.signal(signal.SIGINT, noted.note)
    try:
        yield noted
    finally:
        signal.signal(signal.SIGINT, noted.handler if noted.handler is not None else signal.SIG_DFL)


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


class _DropTokenNotice(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(_TOKEN_NOTICE)


@contextlib.contextmanager
def _token_notice_dropped() -> Iterator[None]:
    """While a local Ray starts: Ray's notice that token authentication is on, dropped
    (every other message of its logger still shows)."""
    logger = logging.getLogger(_TOKEN_LOGGER)
    dropped = _DropTokenNotice()
    logger.addFilter(dropped)
    try:
        yield
    finally:
        logger.removeFilter(dropped)


@contextlib.contextmanager
def ray_session(address: str | None = None) -> Iterator[RaySession]:
    """:func:`connect` for the duration of a ``with`` block; closed at its end, also when
    it ends by an exception (Ctrl-C included). Raises what :func:`connect` raises."""
    session = connect(address)
    try:
        yield session
    finally:
        session.close()

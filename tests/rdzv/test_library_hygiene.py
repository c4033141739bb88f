"""rdzv behaves as a library: no output unless the application asks, and errors whose chain
names only what a user can act on (never a private rdzv exception)."""

from __future__ import annotations

import socket
from datetime import timedelta

import pytest

from rdzv.errors import StoreConnectionError, StoreTimeoutError
from rdzv.events import get_logger
from rdzv.store.client import TCPStore
from tests.rdzv.conftest import fresh_python


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and every exception reachable through ``__cause__`` and ``__context__``."""
    seen: list[BaseException] = []
    todo = [exc]
    while todo:
        current = todo.pop()
        if any(current is s for s in seen):
            continue
        seen.append(current)
        todo += [e for e in (current.__cause__, current.__context__) if e is not None]
    return seen


def _private_rdzv(chain: list[BaseException]) -> list[str]:
    """The exceptions of ``chain`` that are rdzv's but not public (public: ``rdzv.errors``)."""
    names = [f"{type(e).__module__}.{type(e).__qualname__}" for e in chain]
    return [n for n in names if n.startswith("rdzv.") and not n.startswith("rdzv.errors.")]


@pytest.fixture
def stores() -> tuple[TCPStore, TCPStore]:
    master = TCPStore("127.0.0.1", 0, is_master=True, timeout=timedelta(seconds=30))
    try:
        worker = TCPStore("127.0.0.1", master.port, timeout=30)
    except BaseException:
        master.close()
        raise
    try:
        yield master, worker
    finally:
        worker.close()
        master.close()


def test_the_readmes_timed_out_wait_chains_no_private_exception(
    stores: tuple[TCPStore, TCPStore],
) -> None:
    _, worker = stores
    with pytest.raises(StoreTimeoutError) as info:
        worker.wait(["missing"], timedelta(seconds=0.2))
    assert "wait timeout after 200ms, keys: /missing" in str(info.value)
    assert _private_rdzv(_chain(info.value)) == []


def test_a_timed_out_get_chains_no_private_exception(stores: tuple[TCPStore, TCPStore]) -> None:
    _, worker = stores
    worker.set_timeout(0.2)
    with pytest.raises(StoreTimeoutError) as info:
        worker.get("missing")
    assert _private_rdzv(_chain(info.value)) == []


def test_a_silent_acceptor_gives_a_connection_error_without_a_private_cause() -> None:
    with socket.socket() as silent:  # listens, never accepts, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        with pytest.raises(StoreConnectionError) as info:
            TCPStore("127.0.0.1", silent.getsockname()[1], timeout=1.0)
    assert "never answers the handshake" in str(info.value)
    assert _private_rdzv(_chain(info.value)) == []


def test_a_refused_connection_keeps_the_os_error_as_its_cause() -> None:
    with socket.socket() as bound:  # bound, not listening: connections are refused
        bound.bind(("127.0.0.1", 0))
        with pytest.raises(StoreConnectionError) as info:
            TCPStore("127.0.0.1", bound.getsockname()[1], timeout=0.3)
    assert isinstance(info.value.__cause__, ConnectionRefusedError)
    assert _private_rdzv(_chain(info.value)) == []


def test_a_connect_that_got_no_answer_chains_a_builtin_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def connect(self: socket.socket, address: object) -> None:
        raise TimeoutError("timed out")  # what a dropped SYN looks like at the attempt's bound

    monkeypatch.setattr(socket.socket, "connect", connect)
    with pytest.raises(StoreConnectionError) as info:
        TCPStore("127.0.0.1", 9, timeout=0.3)
    assert info.value.connect_cause == "no answer"
    assert type(info.value.__cause__) is TimeoutError
    assert _private_rdzv(_chain(info.value)) == []


#: Logs two events and a plain warning through rdzv's loggers. ``argv[1]`` says when the
#: application imports (and, for ``*-configured``, configures) logging: before importing rdzv,
#: after it, or never. Prints whether ``logging`` was imported once rdzv's import was done.
_LOGS = """
import sys
mode = sys.argv[1]
def configure():
    import logging
    if mode.endswith("-configured"):
        logging.basicConfig(format="%(name)s %(levelname)s %(message)s")
if mode.startswith("logging-first"):
    configure()
from rdzv import StaticTCPRendezvous
from rdzv.events import WARNING, emit, get_logger
print("logging" in sys.modules, flush=True)
if mode.startswith("rdzv-first"):
    configure()
log = get_logger("rdzv.rendezvous")
emit(log, "member_lost", WARNING, run_id="job-1", round=0, rank=0, lost_rank=2)
emit(log, "exit_wait_ended", WARNING, missing=[3], message="rank 3 did not call shutdown()")
get_logger("rdzv.server").warning("a plain warning")
print("logging" in sys.modules, flush=True)
"""

_LINES = [
    "rdzv.rendezvous WARNING member_lost run_id='job-1' round=0 rank=0 lost_rank=2",
    "rdzv.rendezvous WARNING exit_wait_ended: rank 3 did not call shutdown()",
    "rdzv.server WARNING a plain warning",
]


def _run_logs(mode: str) -> tuple[list[str], list[str]]:
    """stdout and stderr lines of :data:`_LOGS` run in a fresh interpreter in ``mode``."""
    return fresh_python(_LOGS, mode)


@pytest.mark.parametrize("mode", ["logging-first", "rdzv-first", "never"])
def test_with_logging_unconfigured_rdzv_writes_nothing_to_stderr(mode: str) -> None:
    _, stderr = _run_logs(mode)
    assert stderr == []


@pytest.mark.parametrize("mode", ["logging-first-configured", "rdzv-first-configured"])
def test_configured_logging_shows_rdzvs_events_whether_configured_before_or_after_import(
    mode: str,
) -> None:
    _, stderr = _run_logs(mode)
    assert stderr == _LINES


def test_rdzv_never_imports_logging_itself() -> None:
    stdout, stderr = _run_logs("never")
    assert stdout == ["False", "False"]
    assert stderr == []


def test_emit_also_takes_a_logging_logger() -> None:
    code = (
        "import logging\n"
        "logging.basicConfig(format='%(name)s %(message)s')\n"
        "from rdzv.events import emit\n"
        "emit(logging.getLogger('rdzv.x'), 'ev', logging.WARNING, a=1)\n"
    )
    _, stderr = fresh_python(code)
    assert stderr == ["rdzv.x ev a=1"]


def test_the_store_server_imports_no_logging_and_its_warnings_write_nothing_unconfigured() -> None:
    # Hosting imports the server inside the first join: no logging, typing or dataclasses
    # there either. Its warnings go through rdzv's lazy loggers: once the application has
    # imported logging (and configured nothing), they still print nothing.
    code = (
        "import sys\n"
        "from rdzv import StaticTCPRendezvous\n"
        "import rdzv.store.server._server, rdzv.store.state._fast\n"
        "print(sorted({'logging', 'typing', 'dataclasses'} & set(sys.modules)))\n"
        "import logging\n"
        "rdzv.store.server._server._log.warning('a plain warning')\n"
        "logging.getLogger('rdzv.server').warning('another')\n"
    )
    stdout, stderr = fresh_python(code)
    assert stdout == ["[]"]
    assert stderr == []


def test_get_logger_gives_one_logger_per_name_under_rdzv_only() -> None:
    assert get_logger("rdzv.client") is get_logger("rdzv.client")
    with pytest.raises(ValueError, match=r"get_logger\('torch\.x'\): rdzv's loggers live under"):
        get_logger("torch.x")


def test_a_lazy_logger_is_the_logging_logger_of_its_name_once_logging_is_imported() -> None:
    # pytest has imported logging: the real logger exists and takes this test's level.
    import logging

    lazy = get_logger("rdzv.test_hygiene")
    assert lazy.real() is logging.getLogger("rdzv.test_hygiene")
    assert any(isinstance(h, logging.NullHandler) for h in logging.getLogger("rdzv").handlers)

"""Past the join deadline, one member per round names the missing ranks (invariant 11 of
:mod:`rdzv.rendezvous._join`): the store elects it, the others block for its verdict, and
if it dies they name the missing ranks themselves.

Real store servers (a subprocess each, the store hosted outside the rendezvous) and real
client connections; members are threads, or a process of their own where one must die.
Nothing here asserts how long anything took: the tests wait on processes, threads and
store state.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from round_config import round_cfg

from conftest import REPO_ROOT, ServerProcess
from rdzv.errors import RendezvousTimeoutError
from rdzv.events import EventCollector
from rdzv.rendezvous._join import RoundProtocol
from rdzv.rendezvous._round_state import Identity, RoundKeys
from rdzv.store.client import TCPStore

KEYS = RoundKeys("run")
DONE, DIAGNOSING = KEYS.of(0, "done"), KEYS.of(0, "diagnosing")
TIMEOUT = 1.0  # every member's join timeout (one rank never comes)
BOUND = 60.0  # how long the test waits for a thread or a process, at most

# A member (rank 1 of 3) that SIGKILLs its own process the moment it is elected diagnoser.
_DIES_WHEN_ELECTED = """
import logging, os, signal, sys, time
from round_config import round_cfg
from rdzv.events import EVENT_ATTR
from rdzv.rendezvous._join import RoundProtocol
from rdzv.rendezvous._round_state import Identity
from rdzv.store.client import TCPStore

class Die(logging.Handler):
    def emit(self, record):
        if getattr(record, EVENT_ATTR, {}).get("event") == "diagnosing":
            os.kill(os.getpid(), signal.SIGKILL)

logger = logging.getLogger("rdzv.rendezvous")
logger.addHandler(Die())
logger.setLevel(logging.DEBUG)
store = TCPStore("127.0.0.1", int(sys.argv[1]), timeout=30)
me = Identity("host", os.getpid(), 1, 3, "token1")
start = time.monotonic()
RoundProtocol(
    store, round_cfg(1, 3, float(sys.argv[2])), me, 0, start + float(sys.argv[2]),
    time.monotonic, time.time, started=start,
).join()
"""


def _member(port: int, rank: int, world_size: int) -> RoundProtocol:
    store = TCPStore("127.0.0.1", port, timeout=30)
    start = time.monotonic()
    return RoundProtocol(
        store,
        round_cfg(rank, world_size, TIMEOUT),
        Identity("host", 1000 + rank, rank, world_size, f"token{rank}"),
        0,
        start + TIMEOUT,
        time.monotonic,
        time.time,
        started=start,
    )


def _join_all(members: list[RoundProtocol]) -> list[BaseException | None]:
    errors: list[BaseException | None] = [None] * len(members)

    def run(i: int) -> None:
        try:
            members[i].join()
        except BaseException as exc:
            errors[i] = exc

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(members))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(BOUND)
        assert not thread.is_alive(), "a member's join did not end"
    return errors


def _close(members: list[RoundProtocol]) -> None:
    for member in members:
        member.store.close()  # type: ignore[attr-defined]


def _names(events: EventCollector, name: str) -> list[dict[str, Any]]:
    return [e for e in events.events if e["event"] == name]


def test_one_member_is_elected_to_name_the_missing_rank_and_every_member_reports_it(
    server_process: ServerProcess, events: EventCollector
) -> None:
    # 8 watchmen and 3 members that wait past their deadline; rank 11 absent
    members = [_member(server_process.port, rank, 12) for rank in range(11)]
    try:
        errors = _join_all(members)
        for error in errors:
            assert isinstance(error, RendezvousTimeoutError)
            assert "11 of 12 nodes joined; missing ranks: 11." in str(error)
        assert len(_names(events, "diagnosing")) == 1  # one diagnosis, whatever the timing
        verdict = json.loads(members[0].store.get(DONE))
        assert verdict["by"]["rank"] == _names(events, "diagnosing")[0]["rank"]
        assert int(members[0].store.get(DIAGNOSING)) >= 1
    finally:
        _close(members)


def test_the_others_name_the_missing_rank_when_the_elected_diagnoser_is_killed(
    server_process: ServerProcess, events: EventCollector
) -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO_ROOT), str(Path(__file__).parent)]))
    port = str(server_process.port)
    diagnoser = subprocess.Popen([sys.executable, "-c", _DIES_WHEN_ELECTED, port, "0.3"], env=env)
    try:
        assert diagnoser.wait(BOUND) == -signal.SIGKILL  # elected, then killed
    finally:
        if diagnoser.poll() is None:
            diagnoser.kill()
            diagnoser.wait(BOUND)
    members = [_member(server_process.port, 0, 3)]  # rank 2 never comes
    try:
        assert members[0].store.check([KEYS.claim(0, 1)])  # the dead diagnoser had joined
        assert int(members[0].store.get(DIAGNOSING)) == 1
        assert not members[0].store.check([DONE])  # and published nothing
        (error,) = _join_all(members)
        assert isinstance(error, RendezvousTimeoutError)
        assert "2 of 3 nodes joined; missing ranks: 2." in str(error)
        assert json.loads(members[0].store.get(DONE))["by"]["rank"] == 0  # its own verdict
        assert [e["rank"] for e in _names(events, "diagnoser_silent")] == [0]
    finally:
        _close(members)

"""A member's join ends the same with the express as without it (issue 25): each round
below runs twice, members taking the express (:mod:`rdzv.rendezvous._express`) and then
the general join only, and every node's outcome and events must be the same both times
(figures aside: elapsed times and ports differ from run to run)."""

from __future__ import annotations

import logging
import re
import socket

from conftest import InThread
from rdzv.errors import RendezvousError
from rdzv.events import EventCollector
from rdzv.rendezvous import _express
from rdzv.rendezvous.static import StaticTCPRendezvous
from rdzv.store.server import StoreServer

#: (rank, world size) of each node (node 0 first, when one hosts); the members' join
#: timeout in seconds (node 0's is a second longer: whose deadline passes first is fixed).
World = tuple[list[tuple[int, int]], float]


def _words(text: str) -> str:
    """``text`` without what differs between two runs of one round: figures and ports."""
    text = re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:PORT", text)
    text = re.sub(r"pid \d+|\(pid=\d+\)|'pid': \d+", "pid N", text)
    return re.sub(r"\d+(\.\d+)?", "#", text)


def _round(
    port: int, fd: int | None, world: World, hosted: bool
) -> tuple[list[str], list[tuple[str, str]]]:
    """Every node's outcome in one round (``hosted``: node 0 hosts the store, else a store
    server outside the rendezvous does), and the events of the members."""
    nodes_spec, timeout = world
    collector = EventCollector()
    logger = logging.getLogger("rdzv.rendezvous")
    logger.addHandler(collector)
    logger.setLevel(logging.INFO)
    nodes: list[StaticTCPRendezvous] = []
    try:
        for index, (rank, size) in enumerate(nodes_spec):
            nodes.append(
                StaticTCPRendezvous(
                    "127.0.0.1",
                    port,
                    rank,
                    size,
                    "run",
                    timeout + (1.0 if index == 0 else 0.0),
                    read_timeout=30.0,
                    start_daemon=hosted and index == 0,
                    listen_fd=fd if hosted and index == 0 else None,
                )
            )
        joins = [InThread(node.next_rendezvous) for node in nodes]
        outcomes = []
        for join in joins:
            try:
                info = join.outcome(timeout=60)
                outcomes.append(f"rank {info.rank} of {info.world_size}")
            except RendezvousError as exc:
                outcomes.append(f"{type(exc).__name__}: {_words(str(exc))}")
    finally:
        for node in nodes[1:] + nodes[:1]:
            node.shutdown()
        logger.removeHandler(collector)
        logger.setLevel(logging.NOTSET)
    events = sorted(
        (str(e["rank"]), f"{e['event']} {_words(str(e.get('joined', '')))}")
        for e in collector.events
        if e["event"] in ("joined", "complete", "failed") and not (hosted and e["rank"] == 0)
    )
    return outcomes, events


def _both_ways(world: World, hosted: bool = True, words: bool = True) -> list[str]:
    """The round with the express and without: the same outcomes (sorted: which of two
    racing nodes wins is not fixed; ``words`` False: which errors, not what they say, for
    rounds where that depends on who came first) and, with ``words``, the same events of
    its members. The outcomes, sorted."""
    runs = []
    for on in (True, False):
        previous, _express.ON = _express.ON, on
        try:
            if hosted:
                sock = socket.create_server(("127.0.0.1", 0))
                port = sock.getsockname()[1]
                outcomes, events = _round(port, sock.detach(), world, True)
            else:
                with StoreServer("127.0.0.1", 0) as server:
                    outcomes, events = _round(server.port, None, world, False)
        finally:
            _express.ON = previous
        if not words:
            outcomes, events = [outcome.split(":")[0] for outcome in outcomes], []
        runs.append((sorted(outcomes), events))
    assert runs[0] == runs[1], "\n".join(map(repr, runs))
    return runs[0][0]


def test_a_complete_round() -> None:
    outcomes = _both_ways(([(rank, 4) for rank in range(4)], 30.0))
    assert outcomes == [f"rank {rank} of 4" for rank in range(4)]


def test_a_round_its_host_does_not_arbitrate() -> None:  # a store outside the rendezvous
    outcomes = _both_ways(([(rank, 3) for rank in range(3)], 30.0), hosted=False)
    assert outcomes == [f"rank {rank} of 3" for rank in range(3)]


def test_a_missing_rank() -> None:
    outcomes = _both_ways(([(0, 3), (1, 3)], 1.5))
    assert all(outcome.startswith("RendezvousTimeoutError") for outcome in outcomes), outcomes
    assert all("missing" in outcome for outcome in outcomes), outcomes


def test_a_duplicate_rank() -> None:
    outcomes = _both_ways(([(0, 3), (1, 3), (1, 3)], 2.0), words=False)
    assert "RendezvousStateError" in outcomes, outcomes


def test_a_world_size_mismatch() -> None:
    outcomes = _both_ways(([(0, 3), (1, 3), (2, 4)], 2.0), words=False)
    assert "RendezvousStateError" in outcomes, outcomes

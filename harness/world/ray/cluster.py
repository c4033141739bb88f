"""Where one run's actors go on the Ray cluster: its placement group, its actors, their end.

One bundle per node group (a hundredth of a CPU: nodes mostly wait on I/O), ``SPREAD`` over
the cluster's hosts; each group's actor in its bundle, each host's proxy agent pinned to
that host. Every actor is named after the run's tag (``<tag>-g<group>-<generation>``,
``<tag>-agent-<host>``) so that :meth:`Placement.release` can prove it is gone, along with
the placement group; an actor the driver made dies with the driver too (Ctrl-C, a crash).
"""

from __future__ import annotations

import contextlib
import math
import time
from typing import Any, Final

import ray
from ray.util.placement_group import (
    placement_group,
    placement_group_table,
    remove_placement_group,
)
from ray.util.scheduling_strategies import (
    NodeAffinitySchedulingStrategy,
    PlacementGroupSchedulingStrategy,
)

from harness.proxy.client import ToxiproxyClient
from harness.world.ray.actors import NodeGroup, ProxyAgent
from harness.world.ray.groups import Group, placement
from harness.world.ray.network import Agent
from harness.world.ray.waits import Waits

__all__ = ["Placement"]

#: Each node group's share of a CPU (its bundle, and its actor's request).
_CPU: Final = 0.01
#: Concurrent calls an actor serves (the long poll, commands, the clock).
_CONCURRENCY: Final = 8
#: Seconds to wait for the placement group, an actor to come up, and everything to be gone.
_WAIT: Final = 120.0
_GONE_WAIT: Final = 15.0
#: Ray actor classes, made once per process.
_REMOTE: dict[type, Any] = {}


class Placement:
    """The placement group and actors of one run (``tag``); its waits on Ray are ``waits``
    (they give up when the run is stopped)."""

    def __init__(self, tag: str, waits: Waits) -> None:
        self.tag = tag
        self.waits = waits
        self.pg: Any = None
        self.hosts: dict[int, str] = {}  # bundle (group index) -> Ray node id
        self.addresses: dict[str, str] = {}  # Ray node id -> its address
        self._names: list[str] = []  # every actor made
        self._handles: list[Any] = []  # ... and its handle
        self._spares = 0

    def reserve(self, groups: list[Group]) -> None:
        """One bundle per group, spread over the hosts; waits until placed."""
        api: Any = ray  # typed or not, depending on the Ray installed
        hosts: list[dict[str, Any]] = api.nodes()
        self.addresses = {n["NodeID"]: n["NodeManagerAddress"] for n in hosts if n["Alive"]}
        # Room for two actors: a killed actor's successor starts before its resources are
        # given back.
        bundles = [{"CPU": 2 * _CPU} for _ in groups]
        self.pg = placement_group(bundles, strategy="SPREAD", name=f"{self.tag}-pg")
        self.waits.get(self.pg.ready(), _WAIT, f"the placement group {self.tag}-pg")
        table = placement_group_table(self.pg)["bundles_to_node_id"]
        self.hosts = {int(b): str(node_id) for b, node_id in table.items()}
        for group in groups:
            group.host = self.hosts[group.index]

    def agents(self, seed: int) -> dict[str, Agent]:
        """A proxy agent on every host with a bundle, up and answering."""
        actors = {
            host_id: self._start(
                ProxyAgent,
                f"{self.tag}-agent-{host_id[:12]}",
                NodeAffinitySchedulingStrategy(host_id, soft=False),
                0,
                self.addresses[host_id],
                seed,
            )
            for host_id in sorted(set(self.hosts.values()))
        }
        apis = self.waits.get([a.api.remote() for a in actors.values()], _WAIT, "the proxy agents")
        return {
            h: Agent(h, a, ToxiproxyClient(*api))
            for (h, a), api in zip(actors.items(), apis, strict=True)
        }

    def spawn(self, group: Group, store: bool) -> None:
        """Start ``group``'s actor in its bundle (again after a kill: a new process);
        ``store``: it binds the store's port on its host's address."""
        name = f"{self.tag}-g{group.index}-{group.generation + 1}"
        self.adopt(group, self._node_group(name, group.index, len(group.nodes), store))

    def spare(self, bundle: int) -> Any:
        """A one-node actor started ahead in ``bundle``, for the next whole-process restart
        on its host (starting an actor takes seconds on a busy machine; rdzv gives a
        restarted rank two to take its claim over)."""
        self._spares += 1
        return self._node_group(f"{self.tag}-spare{self._spares}", bundle, 1, store=False)

    def warm(self, handles: list[Any], modules: list[str]) -> None:
        """Wait until every actor of ``handles`` (spares) is up and has imported ``modules``
        (what its first node runs): a restart that adopts one then waits for no process to
        start and no import (seconds each on a busy machine)."""
        if handles:
            calls = [handle.preload.remote(modules) for handle in handles]
            self.waits.get(calls, _WAIT, "the spare actors")

    def adopt(self, group: Group, handle: Any) -> None:
        """``handle`` (a new actor on the group's host) hosts ``group`` from now on."""
        group.generation += 1
        group.actor, group.dead, group.ended, group.synced = handle, False, False, False

    def _node_group(self, name: str, bundle: int, size: int, store: bool) -> Any:
        strategy = PlacementGroupSchedulingStrategy(self.pg, placement_group_bundle_index=bundle)
        host = self.hosts[bundle]
        address = self.addresses[host]
        text = placement(size, address, host)
        return self._start(NodeGroup, name, strategy, _CPU, text, address if store else None)

    def sync(self, group: Group) -> None:
        """Wait for ``group``'s actor; learn its PID and its host clock's offset from ours
        (from the quickest of three round trips)."""
        what = f"the actor of node group {group.index}"
        where = self.waits.get(group.actor.where.remote(), _WAIT, what)  # up, and warm
        group.pid = int(where["pid"])
        best = math.inf
        for _ in range(3):
            before = time.monotonic()
            where = ray.get(group.actor.where.remote(), timeout=_WAIT)  # up: quick
            after = time.monotonic()
            if after - before < best:
                best = after - before
                group.offset = float(where["now"]) - (before + after) / 2

    def kill(self, group: Group) -> None:
        """End ``group``'s actor (its process) now, if it still runs."""
        if group.actor is not None and not group.dead:
            group.dead = True
            ray.kill(group.actor, no_restart=True)

    def release(self) -> list[str]:
        """End every actor made here that still runs (the world ended those it used; a
        start-up cut short by Ctrl-C leaves some it never knew of) and remove the placement
        group; what is still there afterwards, one line each."""
        for handle in self._handles:
            with contextlib.suppress(Exception):  # gone already
                ray.kill(handle, no_restart=True)
        if self.pg is not None:
            remove_placement_group(self.pg)
        deadline = time.monotonic() + _GONE_WAIT
        left = list(self._names)
        while left and time.monotonic() < deadline:
            left = [name for name in left if _alive(name)]
            if left:
                time.sleep(0.1)
        found = [f"Ray actors still alive after teardown: {sorted(left)}"] if left else []
        if self.pg is not None:
            while placement_group_table(self.pg).get("state") != "REMOVED":
                if time.monotonic() > deadline:
                    found.append(f"placement group {self.tag}-pg not removed")
                    break
                time.sleep(0.1)
        return found

    def _start(self, cls: type, name: str, strategy: Any, num_cpus: float, *args: Any) -> Any:
        """Create an actor of ``cls`` named ``name`` (it comes up on its own); its handle."""
        remote = _REMOTE.get(cls)
        if remote is None:
            remote = _REMOTE[cls] = ray.remote(cls)
        self._names.append(name)
        handle = remote.options(
            name=name,
            num_cpus=num_cpus,
            max_concurrency=_CONCURRENCY,
            scheduling_strategy=strategy,
            max_restarts=0,
        ).remote(*args)
        self._handles.append(handle)
        return handle


def _alive(name: str) -> bool:
    try:
        ray.get_actor(name)
    except ValueError:
        return False
    return True

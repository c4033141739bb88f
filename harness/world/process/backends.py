"""Backends: how a node process builds the rendezvous handler a scenario names.

* ``static`` — rdzv's static rendezvous, through its registry (``rdzv.create_handler``).
* ``torch-static`` — torch's own ``StaticTCPRendezvous``; ``torch-c10d`` — torch's
  ``DynamicRendezvousHandler`` on the C10d backend, what most torchrun users run (both need
  ``torch==2.13.0``: the ``torch`` extra; how the harness drives them:
  :mod:`harness.world.process.torch_backends`).
* ``module:factory`` — a user's handler: ``factory(params)`` gets an
  ``rdzv.RendezvousParameters`` (backend ``"static"``, the node's rank and timeout in
  ``config``, ``listen_fd`` on node 0) and returns an object with ``next_rendezvous()`` and
  ``shutdown()``, as torch's handlers do.

What the harness needs besides the handler: whether the backend can run here at all
(:func:`unavailable`), which modules the forkserver should import once for every node
(:func:`preload`) and what the checks may expect of it (:func:`traits`).
"""

from __future__ import annotations

import importlib
import importlib.util
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.world.process.jobs.spec import JOB_BACKEND, TORCH_JOB_MODULES
from harness.world.process.torch_backends import (
    TORCH_C10D,
    TORCH_MODULES,
    TORCH_STATIC,
    HandlerArgs,
    create_torch_handler,
)

__all__ = [
    "TORCH_C10D",
    "TORCH_STATIC",
    "Traits",
    "create_handler",
    "module_home",
    "preload",
    "rerun_env",
    "traits",
    "unavailable",
]

_RDZV_PRELOAD = ["rdzv.rendezvous.static", "rdzv.store.client", "rdzv.rendezvous.registry"]


@dataclass(frozen=True)
class Traits:
    """What the checks may expect of a backend.

    Attributes:
        ranks_mirror_nodes: a node's rank is the rank it was configured with (a static
            rendezvous). False where the backend ranks the nodes itself (torch's c10d: by
            host name and PID): then only "distinct, and 0..N-1 when all succeed" holds.
    """

    ranks_mirror_nodes: bool = True


_TRAITS = {TORCH_C10D: Traits(ranks_mirror_nodes=False)}


def traits(backend: str) -> Traits:
    """What ``backend`` promises (a user's ``module:factory``: a static rendezvous's)."""
    return _TRAITS.get(backend, Traits())


def _split(backend: str) -> tuple[str, str]:
    module, _, attr = backend.partition(":")
    return module, attr


def unavailable(backend: str) -> str | None:
    """Why ``backend`` cannot run in this environment, or ``None`` when it can.

    Only checks that the code is importable (cheaply: no import happens); a factory that is
    missing from its module shows up as the node's ``error`` outcome instead.
    """
    if backend == "static":
        return None
    if backend in TORCH_MODULES:
        if importlib.util.find_spec("torch") is None:
            return "torch is not installed (pip install -e '.[torch]' installs torch==2.13.0)"
        return None
    module, _ = _split(backend)
    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError) as exc:
        return f"cannot import the backend module {module!r}: {exc}"
    if found is None:
        return f"no module named {module!r} (backend {backend!r}); is it on PYTHONPATH?"
    return None


def module_home(module: str) -> Path | None:
    """The directory to put on ``PYTHONPATH`` so that ``module`` imports as it does here
    (None when it does not import here)."""
    top = module.partition(".")[0]
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:  # a package: the directory that holds it
        return Path(next(iter(spec.submodule_search_locations))).parent
    return Path(spec.origin).parent if spec.origin else None


def rerun_env(backend: str) -> str:
    """What a command that reruns a scenario on ``backend`` needs before it:
    ``PYTHONPATH=DIR `` for a ``module:factory`` backend whose module imports here from
    ``DIR`` (its nodes import it), else ``""``."""
    if backend == "static" or backend in TORCH_MODULES or ":" not in backend:
        return ""
    where = module_home(_split(backend)[0])
    return f"PYTHONPATH={shlex.quote(str(where))} " if where is not None else ""


def preload(backends: set[str]) -> list[str]:
    """Modules a forkserver imports once so that nodes of ``backends`` start warm (job
    nodes, :data:`~harness.world.process.jobs.spec.JOB_BACKEND`: torch's agent and launcher)."""
    modules = list(_RDZV_PRELOAD)
    for backend in sorted(backends & TORCH_MODULES.keys()):
        if unavailable(backend) is None:
            modules += TORCH_MODULES[backend]
    if JOB_BACKEND in backends and unavailable(TORCH_STATIC) is None:  # job nodes
        modules += TORCH_JOB_MODULES
    return modules


def create_handler(
    backend: str,
    *,
    endpoint: str,
    run_id: str,
    rank: int,
    world_size: int,
    timeout: float,
    config: dict[str, Any],
    listen_fd: int | None,
) -> Any:
    """Build the handler of ``backend`` for one node (called inside the node process).

    Raises:
        ImportError, AttributeError: a ``module:factory`` backend cannot be found.
        Exception: whatever the backend's own constructor raises (the node reports it).
    """
    if backend in TORCH_MODULES:
        args = HandlerArgs(endpoint, run_id, rank, world_size, timeout, config, listen_fd)
        return create_torch_handler(backend, args)
    from rdzv import RendezvousParameters

    settings: dict[str, Any] = {"rank": rank, "timeout": timeout, **config}
    if listen_fd is not None:
        settings["listen_fd"] = listen_fd
    create = _rdzv_creator(backend)
    return create(
        RendezvousParameters("static", endpoint, run_id, world_size, world_size, **settings)
    )


def _rdzv_creator(backend: str) -> Callable[[Any], Any]:
    """rdzv's registry for ``static``; the user's factory for ``module:factory``."""
    if backend == "static":
        from rdzv import create_handler as rdzv_create

        return rdzv_create
    module, attr = _split(backend)
    factory: Callable[[Any], Any] = getattr(importlib.import_module(module), attr)
    return factory

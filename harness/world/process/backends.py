"""Backends: how a node process builds the rendezvous handler a scenario names.

* ``static`` — rdzv's static rendezvous, through its registry (``rdzv.create_handler``).
* ``torch-static`` — torch's own ``StaticTCPRendezvous`` (needs ``torch==2.13.0``: the
  ``torch`` extra). Node 0 serves torch's TCPStore on the socket the harness bound for it,
  handed over as ``master_listen_fd`` (torch's handler has no parameter for it, so the node
  process wraps the ``TCPStore`` the handler constructs). torch takes whole seconds.
* ``module:factory`` — a user's handler: ``factory(params)`` gets an
  ``rdzv.RendezvousParameters`` (backend ``"static"``, the node's rank and timeout in
  ``config``, ``listen_fd`` on node 0) and returns an object with ``next_rendezvous()`` and
  ``shutdown()``, as torch's handlers do.

What the harness needs besides the handler: whether the backend can run here at all
(:func:`unavailable`) and which modules the forkserver should import once for every node
(:func:`preload`).
"""

from __future__ import annotations

import importlib
import importlib.util
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["TORCH_STATIC", "create_handler", "module_home", "preload", "rerun_env", "unavailable"]

TORCH_STATIC = "torch-static"
_TORCH_HANDLER = "torch.distributed.elastic.rendezvous.static_tcp_rendezvous"
_WRAPPED = "_harness_serves_on_listen_fd"
_RDZV_PRELOAD = ["rdzv.rendezvous.static", "rdzv.store.client", "rdzv.rendezvous.registry"]


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
    if backend == TORCH_STATIC:
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
    if backend in ("static", TORCH_STATIC) or ":" not in backend:
        return ""
    where = module_home(_split(backend)[0])
    return f"PYTHONPATH={shlex.quote(str(where))} " if where is not None else ""


def preload(backends: set[str]) -> list[str]:
    """Modules a forkserver imports once so that nodes of ``backends`` start warm."""
    modules = list(_RDZV_PRELOAD)
    if TORCH_STATIC in backends and unavailable(TORCH_STATIC) is None:
        modules.append(_TORCH_HANDLER)
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
    settings: dict[str, Any] = {"rank": rank, "timeout": timeout, **config}
    if backend == TORCH_STATIC:
        from torch.distributed.elastic.rendezvous import RendezvousParameters as TorchParams
        from torch.distributed.elastic.rendezvous import registry

        params_class: Any = TorchParams

        if listen_fd is not None:
            _serve_on(listen_fd)
        # torch reads whole seconds; never round a short timeout down to "no time at all".
        settings["timeout"] = max(1, round(timeout))
        create: Callable[[Any], Any] = registry.get_rendezvous_handler
    else:
        from rdzv import RendezvousParameters

        params_class = RendezvousParameters

        if listen_fd is not None:
            settings["listen_fd"] = listen_fd
        create = _rdzv_creator(backend)
    return create(params_class("static", endpoint, run_id, world_size, world_size, **settings))


def _rdzv_creator(backend: str) -> Callable[[Any], Any]:
    """rdzv's registry for ``static``; the user's factory for ``module:factory``."""
    if backend == "static":
        from rdzv import create_handler as rdzv_create

        return rdzv_create
    module, attr = _split(backend)
    factory: Callable[[Any], Any] = getattr(importlib.import_module(module), attr)
    return factory


def _serve_on(listen_fd: int) -> None:
    """Make torch's static handler serve its store on ``listen_fd`` (this process only)."""
    handler_module: Any = importlib.import_module(_TORCH_HANDLER)
    real = handler_module.TCPStore
    if getattr(real, _WRAPPED, False):
        return  # already wrapped in this process

    def tcp_store(*args: Any, **kwargs: Any) -> Any:
        is_master = kwargs.get("is_master", args[3] if len(args) > 3 else False)
        if is_master:
            kwargs["master_listen_fd"] = listen_fd
        return real(*args, **kwargs)

    setattr(tcp_store, _WRAPPED, True)
    handler_module.TCPStore = tcp_store

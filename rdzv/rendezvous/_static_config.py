"""Validated settings of the static backend, from either constructor form (pure: no I/O).

Both :class:`~rdzv.rendezvous.static.StaticTCPRendezvous` forms and
``create_rdzv_handler`` end here, so every value is checked once, before any network
activity, and every error names the option, the bad value and where it came from ("config
option 'timeout' of RendezvousParameters" or "argument 'timeout' of StaticTCPRendezvous").

Config keys of the ``static`` backend (``RendezvousParameters(**config)`` /
``--rdzv-conf k=v,...``):

* ``rank`` (required): this node's rank, ``0 <= rank < max_nodes``; an int or decimal string.
* ``timeout`` / ``join_timeout`` (alias): seconds (int, float, decimal string or
  ``timedelta``) for the whole join, connect included. Default 600 (torch's).
* ``read_timeout``: seconds for one store operation of the returned store, and the bound of
  the exit barrier. Default: the join timeout (torch gives its store the join timeout).
* ``start_daemon`` / ``is_host`` (alias): whether this node hosts the store. Default: rank 0.
* ``listen_fd``: a bound socket (file descriptor) the hosting node serves on instead of
  binding the port itself, for race-free port hand-over (torch's ``master_listen_fd``); the
  store server takes ownership of the descriptor.

Unknown keys are rejected: a misspelt key must not silently fall back to a default. Each
value is parsed by :mod:`rdzv.rendezvous._config_values`; this module picks the options,
checks them against each other and the endpoint, and builds the :class:`StaticConfig`.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

from rdzv.endpoint import parse_rendezvous_endpoint
from rdzv.rendezvous._config_values import (
    parse_bool,
    parse_listen_fd,
    parse_rank,
    parse_timeout,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Final

    from rdzv.rendezvous.api import RendezvousParameters

__all__ = [
    "ACCEPTED_KEYS",
    "DEFAULT_TIMEOUT",
    "StaticConfig",
    "config_from_arguments",
    "config_from_params",
    "parse_bool",
    "parse_rank",
    "parse_timeout",
    "static_config",
]

DEFAULT_TIMEOUT: Final = timedelta(seconds=600)
ACCEPTED_KEYS: Final = frozenset(
    {"rank", "timeout", "join_timeout", "read_timeout", "start_daemon", "is_host", "listen_fd"}
)


class StaticConfig:
    """Everything a static handler needs, validated.

    Attributes:
        host: the store host every node dials (node 0's address).
        port: the store port.
        rank: this node's rank.
        world_size: how many nodes every round admits.
        run_id: the run these nodes belong to.
        join_timeout: bound of one ``next_rendezvous`` call (connect + join).
        read_timeout: per-operation timeout of the store handed to users; exit-barrier bound.
        start_daemon: whether this node hosts the store server.
        listen_fd: an already-bound socket the host adopts instead of binding ``port``.
        local_addr: this node's address as given to ``RendezvousParameters``.

    Read-only by convention (nothing assigns to it after construction); a plain slotted
    class, as ``dataclasses`` would cost the import line a few milliseconds.
    """

    __slots__ = (
        "host",
        "join_timeout",
        "listen_fd",
        "local_addr",
        "port",
        "rank",
        "read_timeout",
        "run_id",
        "start_daemon",
        "world_size",
    )

    def __init__(
        self,
        *,
        host: str,
        port: int,
        rank: int,
        world_size: int,
        run_id: str,
        join_timeout: timedelta,
        read_timeout: timedelta,
        start_daemon: bool,
        listen_fd: int | None = None,
        local_addr: str | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.rank = rank
        self.world_size = world_size
        self.run_id = run_id
        self.join_timeout = join_timeout
        self.read_timeout = read_timeout
        self.start_daemon = start_daemon
        self.listen_fd = listen_fd
        self.local_addr = local_addr

    def __repr__(self) -> str:
        order = (
            "host",
            "port",
            "rank",
            "world_size",
            "run_id",
            "join_timeout",
            "read_timeout",
            "start_daemon",
            "listen_fd",
            "local_addr",
        )
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in order)
        return f"StaticConfig({shown})"

    @property
    def endpoint(self) -> str:
        """``host:port`` as users write it (IPv6 hosts in brackets)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def _msg(*parts: str) -> str:
    """Join message parts with single spaces (no implicit string concatenation)."""
    return " ".join(parts)


def _pick(config: Mapping[str, Any], names: tuple[str, str], where: str) -> tuple[str, Any] | None:
    """Return ``(name, value)`` of whichever alias is set; both set must agree."""
    present = [(name, config[name]) for name in names if config.get(name) is not None]
    if len(present) == 2 and present[0][1] != present[1][1]:
        (a, va), (b, vb) = present
        raise ValueError(
            f"{where} sets both '{a}' ({va!r}) and its alias '{b}' ({vb!r}); keep one of them."
        )
    return present[0] if present else None


def static_config(
    *,
    host: str,
    port: int,
    world_size: int,
    run_id: str,
    config: Mapping[str, Any],
    source: str,
    local_addr: str | None = None,
) -> StaticConfig:
    """Validate the static backend's settings.

    Args:
        host: the parsed endpoint host.
        port: the parsed endpoint port.
        world_size: the fixed number of nodes.
        run_id: the run id.
        config: the options (the keys documented in this module).
        source: where the options came from, quoted in messages (e.g.
            ``"RendezvousParameters"``).
        local_addr: this node's address, if given.

    Returns:
        The validated configuration.

    Raises:
        ValueError: an unknown key, a bad value, a missing rank, a world size below 1, or
            port 0 for more than one node (clients cannot dial port 0).
    """
    unknown = sorted(set(config) - ACCEPTED_KEYS)
    if unknown:
        accepted = ", ".join(sorted(ACCEPTED_KEYS))
        raise ValueError(
            _msg(
                f"{source} has unknown option(s) {unknown} for the static rendezvous backend;",
                f"accepted options: {accepted}.",
            )
        )
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world size {world_size!r} from {source} must be an integer >= 1.")
    if config.get("rank") is None:
        raise ValueError(
            _msg(
                f"rank is absent in {source}. Try adding --node-rank to the command line",
                "(config option 'rank' of the static backend).",
            )
        )
    rank = parse_rank(config["rank"], world_size, f"option 'rank' of {source}")
    if port == 0 and world_size > 1:
        raise ValueError(
            _msg(
                f"the endpoint {host}:0 from {source} has port 0, which no other node can dial;",
                f"give the {world_size} nodes a fixed port (--master-port).",
            )
        )
    if not 0 <= port <= 65535:
        raise ValueError(f"port {port!r} from {source} must be between 0 and 65535.")
    picked = _pick(config, ("timeout", "join_timeout"), source)
    join_timeout = (
        parse_timeout(picked[1], f"option '{picked[0]}' of {source}") if picked else DEFAULT_TIMEOUT
    )
    read = config.get("read_timeout")
    read_timeout = (
        join_timeout if read is None else parse_timeout(read, f"option 'read_timeout' of {source}")
    )
    picked = _pick(config, ("start_daemon", "is_host"), source)
    start_daemon = (
        parse_bool(picked[1], f"option '{picked[0]}' of {source}") if picked else rank == 0
    )
    fd = config.get("listen_fd")
    listen_fd = None if fd is None else parse_listen_fd(fd, f"option 'listen_fd' of {source}")
    if listen_fd is not None and not start_daemon:
        raise ValueError(
            _msg(
                f"option 'listen_fd' of {source} is set on rank {rank}, which does not host the",
                "store; only the hosting node (start_daemon) listens.",
            )
        )
    return StaticConfig(
        host=host,
        port=port,
        rank=rank,
        world_size=world_size,
        run_id=run_id,
        join_timeout=join_timeout,
        read_timeout=read_timeout,
        start_daemon=start_daemon,
        listen_fd=listen_fd,
        local_addr=local_addr,
    )


def config_from_params(params: RendezvousParameters) -> StaticConfig:
    """Validate ``params`` in torch's order, then every static option.

    Raises:
        ValueError: rank, endpoint or port absent (torch's messages, checked in torch's
            order); a malformed endpoint; ``min_nodes != max_nodes``; or a bad option.
    """
    source = "RendezvousParameters"
    if params.config.get("rank") is None:
        raise ValueError(
            _msg(
                "rank is absent in RendezvousParameters. Try add --node-rank to the cmd request",
                "(config option 'rank' of the static backend).",
            )
        )
    endpoint = (params.endpoint or "").strip()
    if not endpoint:
        raise ValueError(
            _msg(
                "endpoint is absent in RendezvousParameters. Try add --master-port and",
                "--master-addr to the cmd request (endpoint 'host:port').",
            )
        )
    host, port = parse_rendezvous_endpoint(endpoint, -1)
    if port == -1:
        raise ValueError(
            f"Port is absent in endpoint: {endpoint}. Try launching with --master-port"
        )
    if params.min_nodes != params.max_nodes:
        raise ValueError(
            _msg(
                f"the static rendezvous backend needs a fixed world size, but {source} has",
                f"min_nodes={params.min_nodes} and max_nodes={params.max_nodes}; use",
                f"--nnodes={params.max_nodes} (min_nodes == max_nodes) or an elastic backend.",
            )
        )
    return static_config(
        host=host,
        port=port,
        world_size=params.max_nodes,
        run_id=params.run_id,
        config=params.config,
        source=source,
        local_addr=params.local_addr,
    )


def config_from_arguments(
    master_addr: str,
    master_port: int | None,
    rank: int | None,
    world_size: int | None,
    run_id: str | None,
    options: dict[str, Any],
) -> StaticConfig:
    """Validate torch's positional form ``(master_addr, master_port, rank, world_size, ...)``.

    Raises:
        TypeError: a required argument is missing.
        ValueError: a bad port, host, rank, world size or option (named with its value).
    """
    plain = _plain_arguments(master_addr, master_port, world_size, run_id, options)
    if plain is not None:
        return plain
    source = "the StaticTCPRendezvous arguments"
    if master_port is None or world_size is None or run_id is None or rank is None:
        raise TypeError(
            _msg(
                "StaticTCPRendezvous(master_addr, master_port, rank, world_size, run_id, timeout)",
                "needs master_port, rank, world_size and run_id.",
            )
        )
    if isinstance(master_port, bool) or not isinstance(master_port, int):
        raise ValueError(f"master_port of {source} must be an int; got {master_port!r}.")
    if not master_addr.strip():
        raise ValueError(f"master_addr of {source} is empty; give node 0's host name or address.")
    parse_timeout(options["timeout"], f"argument 'timeout' of {source}")
    return static_config(
        host=master_addr.strip(),
        port=master_port,
        world_size=world_size,
        run_id=run_id,
        config={key: value for key, value in options.items() if value is not None},
        source=source,
    )


#: The largest number of seconds a ``timedelta`` holds (999,999,999 days), rounded down.
_MAX_SECONDS: Final = 86_399_999_999_999.0


def _plain_arguments(
    master_addr: str, port: int | None, world_size: int | None, run_id: str | None, options: Any
) -> StaticConfig | None:
    """The configuration of the common positional form (int port, rank and world size, a
    timeout in int or float seconds, no other option), checked in a few steps: what
    :func:`static_config` makes of the same arguments; None for anything else, which the
    general checks take (and name, if it is wrong). A node's first join pays for every
    function it runs for the first time."""
    rank, timeout = options["rank"], options["timeout"]
    if (
        type(master_addr) is not str
        or type(port) is not int
        or type(rank) is not int
        or type(world_size) is not int
        or type(run_id) is not str
        or (type(timeout) is not int and type(timeout) is not float)
        or not 0 < port <= 65535
        or not 0 <= rank < world_size
        or not 0 < timeout <= _MAX_SECONDS  # (NaN fails it too)
        or not master_addr
        or master_addr.strip() != master_addr
        or options["read_timeout"] is not None
        or options["start_daemon"] is not None
        or options["listen_fd"] is not None
        or len(options) != 5  # rank, timeout and the three above
    ):
        return None
    join_timeout = timedelta(seconds=float(timeout))
    return StaticConfig(
        host=master_addr,
        port=port,
        rank=rank,
        world_size=world_size,
        run_id=run_id,
        join_timeout=join_timeout,
        read_timeout=join_timeout,
        start_daemon=rank == 0,
    )

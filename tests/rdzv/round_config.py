"""The settings a test's round runs with (node 0 hosts; 127.0.0.1:29400, never dialled)."""

from __future__ import annotations

from datetime import timedelta

from rdzv.rendezvous._static_config import StaticConfig


def round_cfg(
    rank: int,
    world_size: int = 2,
    timeout: float = 5.0,
    read: float | None = None,
    run_id: str = "run",
) -> StaticConfig:
    """A node's settings: join timeout ``timeout``, read timeout ``read`` (default: the same)."""
    return StaticConfig(
        host="127.0.0.1",
        port=29400,
        rank=rank,
        world_size=world_size,
        run_id=run_id,
        join_timeout=timedelta(seconds=timeout),
        read_timeout=timedelta(seconds=timeout if read is None else read),
        start_daemon=rank == 0,
    )

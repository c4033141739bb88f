"""The Ray world's tests: one local Ray for the whole session, bound to 127.0.0.1.

Ray is the optional ``ray`` extra (``tox -e ray``); without it every test here that needs
it skips with the install command. The Ray is started once (a session fixture: starting it
costs seconds and a good part of a core), shut down at the end of the session by
``ray.shutdown`` (which ends the processes it started), never left running.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness.world.ray.session import INSTALL, RaySession, connect, unavailable


@pytest.fixture(scope="session")
def ray_local() -> Iterator[RaySession]:
    """A local Ray on 127.0.0.1 with 2 CPUs, for the whole session."""
    if unavailable() is not None:
        pytest.skip(f"Ray is not installed: {INSTALL}")
    session = connect(num_cpus=2)
    try:
        yield session
    finally:
        session.close()

"""The Ray world's tests: one local Ray for all of them, bound to 127.0.0.1.

Ray is the optional ``ray`` extra (``tox -e ray``); without it every test here that needs
it skips with the install command. The Ray is started once, by the first test that needs it
(a session fixture: starting it costs seconds and a good part of a core), and shut down by
``ray.shutdown`` (which ends the processes it started) after the last test of this folder
-- so the rest of a full test run does not share the machine with an idle Ray -- or at the
end of the session, whichever comes first. It is never left running.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.world.ray.session import INSTALL, RaySession, connect, unavailable

HERE = Path(__file__).resolve().parent
_STARTED: list[RaySession] = []


@pytest.fixture(scope="session")
def ray_local() -> Iterator[RaySession]:
    """A local Ray on 127.0.0.1 with 2 CPUs, for every test of this folder."""
    if unavailable() is not None:
        pytest.skip(f"Ray is not installed: {INSTALL}")
    session = connect(num_cpus=2)
    _STARTED.append(session)
    try:
        yield session
    finally:
        session.close()


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """After the last test of this folder: stop the Ray (the fixture's own end is then a
    no-op)."""
    if nextitem is None or HERE not in Path(nextitem.path).resolve().parents:
        while _STARTED:
            _STARTED.pop().close()

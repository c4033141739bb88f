"""The real-node helpers of the static tests see every line their nodes print.

``wait_for_line`` once selected on the pipe and then read it through a buffered reader: a
node's ``joined`` that reached the pipe together with the line before it (this process was
late to read, on a loaded machine) sat in the buffer unseen until the node wrote again. In
the restart test that was when the round failed on node 0's 60 s deadline: only then was
the node killed and restarted, node 0 had left, and the restarted node was refused for its
whole join timeout. The dead-member tests timed out waiting for ``joined`` instead.
"""

from __future__ import annotations

import contextlib
import subprocess

import pytest
from static_node_proc import python_process, wait_for_line

# Writes its argument in one write (atomic on a pipe), then lives until its stdin closes.
_PRINTER = "import sys; sys.stdout.write(sys.argv[1]); sys.stdout.flush(); sys.stdin.read()"


def printing(text: str) -> contextlib.AbstractContextManager[subprocess.Popen[str]]:
    return python_process(_PRINTER, text)


def test_a_line_that_reached_the_pipe_together_with_earlier_ones_is_seen_at_once() -> None:
    with printing("join_start\nconnected\njoined\n") as node:
        wait_for_line(node, "joined", timeout=30)  # the node writes nothing more


def test_lines_after_the_awaited_one_are_there_for_the_next_wait() -> None:
    with printing("connected\njoined\n") as node:
        wait_for_line(node, "connected", timeout=30)
        wait_for_line(node, "joined", timeout=30)


def test_a_node_that_ends_without_the_line_fails_the_wait_naming_what_it_printed() -> None:
    with printing("join_start\nfailed\n") as node:
        assert node.stdin is not None
        node.stdin.close()  # it ends
        with pytest.raises(
            AssertionError, match=r"never reported 'joined'.*'join_start', 'failed'"
        ):
            wait_for_line(node, "joined", timeout=30)

"""The embedded proxy in a process of its own (``python -m harness.proxy --port 0``: the
server of ``harness proxy`` without the rest of the command line's imports), for more links
than one process can hold.

Each proxied link holds three descriptors in the proxy's process (its listener, the
node's connection, the dial upstream), so 10,240 links need 30,720: past this machine's
limit of open files for one process (``ulimit -Hn``), and one event loop then relays
every byte of every link. A world with that many links spreads them over several
:class:`ProxyProcess` (see ``LINKS_PER_PROXY`` in :mod:`harness.world.proxied`), each
driven through its own :class:`~harness.proxy.client.ToxiproxyClient`.

The process prints ``harness proxy: API on http://HOST:PORT seed N`` once it listens;
:meth:`ProxyProcess.ready` reads that line back (no port is guessed). Its error output goes
to a file (:attr:`ProxyProcess.log`), never a pipe nobody reads. Its standard input is a
pipe from the process that started it (``--until-stdin-closes``): when that process ends,
however it ends (SIGKILL included), the proxy stops too.
"""

from __future__ import annotations

import os
import re
import selectors
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from harness.errors import ProxyStartError
from harness.proxy.client import ToxiproxyClient

__all__ = ["START_WAIT", "ProxyProcess", "start_all", "stop_all"]

_READY = re.compile(r"API on http://\[?([^\]\s]+?)\]?:(\d+) seed")
#: Seconds a proxy process gets to print its address (it imports aiohttp: ~0.2 s when idle).
START_WAIT = 60.0
#: Seconds a proxy process gets to stop after SIGTERM before it is killed.
STOP_WAIT = 10.0


class ProxyProcess:
    """One ``harness proxy`` process on ``host`` with ``seed``: :meth:`launch`, then
    :meth:`ready` (or :func:`start_all` for several at once); always :meth:`stop`."""

    def __init__(self, host: str = "127.0.0.1", seed: int = 0) -> None:
        self.host, self.seed = host, seed
        self.port = 0
        self.log: Path | None = None
        self._proc: subprocess.Popen[str] | None = None

    @property
    def running(self) -> bool:
        """The process was launched and has not ended."""
        return self._proc is not None and self._proc.poll() is None

    def launch(self) -> ProxyProcess:
        """Start the process (returns at once; :meth:`ready` waits for its address)."""
        fd, name = tempfile.mkstemp(prefix="harness-proxy-", suffix=".log")
        self.log = Path(name)
        command = [sys.executable, "-m", "harness.proxy", "--host", self.host, "--port", "0"]
        command += ["--seed", str(self.seed), "--until-stdin-closes"]
        try:  # its stdin is a pipe from here: it ends with this process, however this ends
            self._proc = subprocess.Popen(
                command, stdout=subprocess.PIPE, stderr=fd, stdin=subprocess.PIPE, text=True
            )
        finally:
            os.close(fd)
        return self

    def ready(self, deadline: float) -> ToxiproxyClient:
        """Wait (until ``deadline``, monotonic) for the API's address; a client of it.

        Raises:
            ProxyStartError: the process ended or printed no address in time (its log named).
        """
        proc = self._proc
        assert proc is not None and proc.stdout is not None, "launch() first"
        line = ""
        with selectors.DefaultSelector() as selector:
            selector.register(proc.stdout, selectors.EVENT_READ)
            while not line:
                left = deadline - time.monotonic()
                if left <= 0 or not selector.select(left):
                    break
                line = proc.stdout.readline()
                if not line:  # EOF: the process ended
                    break
        found = _READY.search(line)
        if found is None:
            self.stop()
            why = f"ended with status {proc.returncode}" if line == "" else "printed no address"
            raise ProxyStartError(
                f"a proxy process (harness proxy, pid {proc.pid}) {why} within"
                f" {START_WAIT:g} s; its errors are in {self.log}"
            )
        self.port = int(found.group(2))
        return ToxiproxyClient(found.group(1), self.port)

    def terminate(self) -> None:
        """Ask the process to end (SIGTERM); :meth:`stop` waits for it."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()

    def stop(self, wait: float = STOP_WAIT) -> None:
        """End the process (SIGTERM, then SIGKILL after ``wait`` seconds); idempotent. Its
        log is removed when it said nothing."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(wait)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()
        if self.log is not None and self.log.exists() and self.log.stat().st_size == 0:
            self.log.unlink()


def start_all(count: int, host: str, seed: int) -> tuple[list[ProxyProcess], list[ToxiproxyClient]]:
    """Start ``count`` proxy processes at once and wait for all of them.

    Raises:
        ProxyStartError: one did not start (every one started is stopped again).
    """
    procs = [ProxyProcess(host, seed) for _ in range(count)]
    try:
        for proc in procs:
            proc.launch()
        deadline = time.monotonic() + START_WAIT
        clients = [proc.ready(deadline) for proc in procs]
    except BaseException:
        stop_all(procs)
        raise
    return procs, clients


def stop_all(procs: Sequence[ProxyProcess]) -> None:
    """Stop every process of ``procs``: SIGTERM to all at once, then wait for each (one
    ``STOP_WAIT`` for them all, then SIGKILL)."""
    for proc in procs:
        proc.terminate()
    deadline = time.monotonic() + STOP_WAIT
    for proc in procs:
        proc.stop(max(0.0, deadline - time.monotonic()))

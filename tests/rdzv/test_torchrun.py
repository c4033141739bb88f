"""rdzv as torchrun's backend (rdzv/torchrun.py): real torchrun agents with gloo workers.

Marked ``torch``: skipped without torch==2.13.0 (``tox -e torch`` runs them).
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch.distributed.run")

from rdzv.torchrun import (
    BACKEND,
    TorchrunRendezvous,
    create_handler,
    node_rank_from_torchrun,
)
from tests.rdzv.torchrun_jobs import torchrun_job

pytestmark = pytest.mark.torch

JOB_SECONDS = 240  # the bound of one small job's run (generous: torch imports on 2 busy cores)


def _params(**config: object) -> object:
    from torch.distributed.elastic.rendezvous import RendezvousParameters

    return RendezvousParameters(
        backend=BACKEND, endpoint="127.0.0.1:29400", run_id="r", min_nodes=2, max_nodes=2, **config
    )


def test_torch_registry_finds_the_rdzv_backend_through_its_entry_point() -> None:
    from torch.distributed.elastic.rendezvous.registry import get_rendezvous_handler

    handler = get_rendezvous_handler(_params(rank=1))
    assert isinstance(handler, TorchrunRendezvous)
    assert handler.get_backend() == BACKEND
    assert handler.use_agent_store is True
    assert handler.rank == 1
    assert handler.num_nodes_waiting() == 0  # no round yet: nobody can wait for this node


#: Imports every module of rdzv but the plugin and makes a handler through rdzv's registry,
#: then prints the torch modules loaded (torch is installed: this module skips otherwise).
_NO_TORCH = """
import importlib, pkgutil, sys
import rdzv
for found in pkgutil.walk_packages(rdzv.__path__, "rdzv."):
    if found.name not in ("rdzv.torchrun", "rdzv.__main__"):
        importlib.import_module(found.name)
rdzv.get_rendezvous_handler(
    rdzv.RendezvousParameters("static", "127.0.0.1:1", "r", 2, 2, rank=1)
)
print(sorted(name for name in sys.modules if name.partition(".")[0] == "torch"))
"""


def test_rdzv_and_its_registry_load_no_torch_module_where_torch_is_installed() -> None:
    # the layer test reads the imports; this runs them, entry points and lazy imports too
    done = subprocess.run(
        [sys.executable, "-c", _NO_TORCH], check=False, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", done.stdout


def test_get_backend_answers_the_name_torchrun_asked_for() -> None:
    params = _params(rank=0)
    params.backend = "rdzv-static"
    assert create_handler(params).get_backend() == "rdzv-static"


def test_a_missing_rank_names_the_flags_that_work_with_torchrun(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("PET_NODE_RANK", raising=False)
    monkeypatch.setattr(sys, "argv", ["torchrun", "--nnodes=2", "train.py"])
    with pytest.raises(ValueError, match=r"--node-rank=K .*--rdzv-conf rank=K, K in 0\.\.1"):
        create_handler(_params())


def test_the_rank_comes_from_torchruns_node_rank_on_its_command_line() -> None:
    argv = ["--nnodes=4", "--rdzv-backend=rdzv", "--node-rank", "3", "train.py", "--lr=1"]
    assert node_rank_from_torchrun(argv, {}) == (3, "torchrun's --node-rank")
    assert node_rank_from_torchrun(["--node_rank=2", "t.py"], {}) == (2, "torchrun's --node-rank")
    assert node_rank_from_torchrun(["t.py"], {}) == (None, "")


def test_the_rank_comes_from_pet_node_rank_first() -> None:
    assert node_rank_from_torchrun(["--node-rank=1", "t.py"], {"PET_NODE_RANK": "2"}) == (
        2,
        "PET_NODE_RANK",
    )
    with pytest.raises(ValueError, match=r"PET_NODE_RANK='x' .* is not an integer rank"):
        node_rank_from_torchrun([], {"PET_NODE_RANK": "x"})


def test_rdzv_errors_reach_torchrun_as_torchs_classes() -> None:
    from torch.distributed.elastic.rendezvous import api as torch_api

    handler = create_handler(_params(rank=1))
    handler.set_closed()  # before any round: this handler alone is closed
    with pytest.raises(torch_api.RendezvousClosedError, match="closed by this node") as caught:
        handler.next_rendezvous()
    from rdzv.errors import RendezvousClosedError

    assert isinstance(caught.value.__cause__, RendezvousClosedError)


def test_two_agents_run_gloo_workers_that_all_reduce_the_right_sum(tmp_path: Path) -> None:
    with torchrun_job(tmp_path, 2) as job:
        codes = job.wait(JOB_SECONDS)
        outputs = [agent.output() for agent in job.agents]
        assert codes == [0, 0], outputs
        results = [row for agent in job.agents for row in agent.results()]
        assert sorted(r["rank"] for r in results) == ["0", "1"]
        assert {r["sum"] for r in results} == {"3"}
        assert {r["world"] for r in results} == {"2"}
        # the first round runs on the endpoint's store: a job that never restarts needs no
        # other port than the endpoint's (a firewall that opens only it lets it through)
        assert {r["master_port"] for r in results} == {str(job.port)}
        assert "rank_source: rank 1 of 2 from torchrun's --node-rank" in outputs[1]
        assert "complete run_id='test-job' round=0" in outputs[1]  # rdzv's events in its log


def test_the_rank_may_come_from_rdzv_conf(tmp_path: Path) -> None:
    with torchrun_job(tmp_path, 2, rank_flag="--rdzv-conf") as job:
        codes = job.wait(JOB_SECONDS)
        assert codes == [0, 0], [agent.output() for agent in job.agents]
        assert "from --rdzv-conf rank" in job.agents[1].output()


def test_a_worker_restart_completes_with_a_fresh_store_for_the_new_round(tmp_path: Path) -> None:
    # node 1's worker dies after init_process_group in attempt 0; node 1's agent restarts
    # (restart count 1) while node 0's agent re-rendezvouses for the membership change
    # (restart count 0): on one store their workers would meet attempt 0's keys.
    with torchrun_job(tmp_path, 2, max_restarts=1, env={"JOB_DIE_ON": "1:0"}) as job:
        codes = job.wait(JOB_SECONDS)
        outputs = [agent.output() for agent in job.agents]
        assert codes == [0, 0], outputs
        assert "WORKER_DIES 1:0" in outputs[1]
        results = [row for agent in job.agents for row in agent.results()]
        assert sorted(r["rank"] for r in results) == ["0", "1"]
        assert {r["sum"] for r in results} == {"3"}
        ports = {r["master_port"] for r in results}
        assert len(ports) == 1  # both in the same round's store...
        assert ports != {str(job.port)}  # ...a fresh one: round 0's keys are not in it
        assert "round=1" in outputs[0]


def test_the_survivor_fails_with_the_closed_connection_named_when_the_store_hosts_agent_dies(
    tmp_path: Path,
) -> None:
    # the workers stay healthy (held), so the survivor's agent meets the loss in its own
    # use of the store (its num_nodes_waiting() poll), not through a failing worker
    with torchrun_job(tmp_path, 2, join_timeout=30, env={"JOB_HOLD": "1"}) as job:
        host = job.agents[0]
        # wait until node 1's agent started its worker (so it is past the round and the
        # ranks' assignment, which read the round's store through torch's own client, whose
        # failure would be torch's raw DistNetworkError), then kill node 0's agent
        _wait_for_line(job.agents[1].log, "WORKER_HELD")
        host.process.send_signal(signal.SIGKILL)
        survivor = job.agents[1].process.wait(JOB_SECONDS)
        output = job.agents[1].output()
        assert survivor != 0, output
        # torch's agent meets rdzv's error (as torch's class) where it next uses the store
        assert "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError" in output
        # the rendezvous store's connection, or (killed a moment earlier) the round's store
        assert "closed the connection" in output or "could not be" in output, output[-3000:]


def test_node_0_leaves_at_once_when_a_non_host_agent_died(tmp_path: Path) -> None:
    # node 1's agent is SIGKILLed (its worker ends with it) while the workers all-reduce
    # (killed earlier, before its worker joined the process group, node 0's worker would
    # wait in init_process_group for its timeout, on every backend: docs/torchrun.md):
    # node 0's worker fails, its agent (no restarts left) fails and shuts the rendezvous
    # down. rdzv's exit barrier must not wait its read_timeout (900 s here, torchrun's
    # default) for rank 1, whose store connection closed: the pytest timeout is the bound.
    with torchrun_job(tmp_path, 2, read_timeout=900, env={"JOB_LOOP": "1"}) as job:
        _wait_for_line(job.agents[1].log, "WORKER_LOOPS 1")  # the process group is up
        job.agents[1].process.send_signal(signal.SIGKILL)
        code = job.agents[0].process.wait(JOB_SECONDS)
        output = job.agents[0].output()
        assert code != 0, output
        assert "exit_wait_ended: rank 1 left without calling shutdown()" in output, output[-3000:]


def _wait_for_line(log: Path, text: str) -> None:
    """Block until ``text`` appears in ``log`` (inotify-free: a tail process that exits on
    the first match; bounded by the pytest timeout)."""
    subprocess.run(
        ["sh", "-c", f'tail -n +1 -F {log} 2>/dev/null | grep -m1 -F "$0" >/dev/null', text],
        check=True,
        timeout=JOB_SECONDS,
    )

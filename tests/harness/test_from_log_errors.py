"""One test per error class: a log (written for the test in one of torch's formats, after
the patterns of ../shared/reference/torch-logs.md) -> the fault ``from-log`` infers, with the
lines it quotes; and the structured inputs (error file, ChildFailedError box, torch's and
rdzv's events, the harness's reports)."""

from __future__ import annotations

import tomllib
from typing import Any

import pytest

from harness.logs import Conversion, FromLogError, convert


def scenario(*logs: tuple[str, str]) -> tuple[dict[str, Any], Conversion]:
    conversion = convert(list(logs), name="t")
    return tomllib.loads(conversion.text), conversion


def kinds(data: dict[str, Any]) -> list[str]:
    return [f["kind"] for f in data.get("fault", [])]


def outcomes(data: dict[str, Any]) -> dict[int, Any]:
    return {n: e["outcome"] for e in data["expect"]["nodes"] for n in e["nodes"]}


REFUSED_PY = """\
INFO:torch.distributed.launcher.api:Starting elastic_operator with launch configs:
  entrypoint       : pretrain.py
  min_nodes        : 3
  max_nodes        : 3
  nproc_per_node   : 2
  run_id           : exp-refused
  rdzv_backend     : static
  rdzv_endpoint    : head-0.cluster.test:29500
  rdzv_configs     : {'rank': 2, 'timeout': 900}
  max_restarts     : 1
INFO:torch.distributed.elastic.agent.server.api:[default] Rendezvous'ing worker group
torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the C10d store has failed. [Errno 111] Connection refused
"""


def test_refused_with_the_store_host_absent_from_the_log_means_nothing_listened() -> None:
    data, conversion = scenario(("n2.log", REFUSED_PY))
    assert data["nodes"] == 3 and kinds(data) == ["absent"]
    assert data["fault"][0]["nodes"] == [0]
    assert outcomes(data)[2] == "connection_error"
    assert data["timeouts"]["join"] == 15.0  # 900 s, minutes become seconds
    summary = "\n".join(conversion.summary())
    assert "node 0 never started" in summary
    assert "not reproduced" in summary and "2 workers per node" in summary
    assert "# torch.distributed.elastic" not in conversion.text
    assert "n2.log:12:" in conversion.text  # the comment quotes the refusal


RDZV_EVENTS = """\
INFO:rdzv.store.server:server_listening endpoint='10.9.0.1:29500' addresses=['10.9.0.1']
INFO:rdzv.rendezvous:join_start run_id='r' round=0 rank=0 endpoint='10.9.0.1:29500' elapsed=0.0 world_size=2
INFO:rdzv.rendezvous:joined run_id='r' round=0 rank=0 endpoint='10.9.0.1:29500' elapsed=0.01 joined=1 world_size=2
WARNING:rdzv.rendezvous:failed: rendezvous round 0 of run 'r' at 10.9.0.1:29500 timed out after 30.0 s: 1 of 2 nodes joined; missing ranks: 1. Start the missing nodes
"""
RDZV_REFUSED = """\
INFO:rdzv.rendezvous:join_start run_id='r' round=0 rank=1 endpoint='10.9.0.1:29500' elapsed=0.0 world_size=2
DEBUG:rdzv.store._connect:connect_attempt endpoint='10.9.0.1:29500' attempt=1 error='ConnectionRefusedError: [Errno 111] Connection refused'
rdzv.errors.RendezvousConnectionError: rank 1 (join timeout 30 s): no rendezvous store answered at 10.9.0.1:29500: gave up after 40 connection attempts in 30.0 s (timeout 30 s); last cause: ConnectionRefusedError: [Errno 111] Connection refused
"""


def test_refused_while_the_store_listened_is_a_link_that_is_down() -> None:
    data, conversion = scenario(("a.log", RDZV_EVENTS), ("b.log", RDZV_REFUSED))
    assert kinds(data) == ["link_down"] and data["fault"][0]["nodes"] == [1]
    assert outcomes(data) == {0: "timeout", 1: "connection_error"}
    assert data["timeouts"]["join"] == 30.0
    assert conversion.facts.backend == "rdzv"
    timeout_entry = next(e for e in data["expect"]["nodes"] if e["nodes"] == [0])
    assert timeout_entry["message"] == "missing ranks: 1\\b"


GLOG_TIMEOUT = """\
I0409 07:28:10.231000 5120 torch/distributed/elastic/agent/server/api.py:681] [default] Rendezvous'ing worker group
W0409 07:28:10.245000 5120 torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py:160] TCP client failed to connect/validate to host gpu-a.example:29400 - retrying (try=0, timeout=60000ms, delay=412ms)
E0409 07:29:10.412000 5120 torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py:162] The client socket has timed out after 60000ms while trying to connect to (gpu-a.example, 29400).
torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the C10d store has failed. See inner exception for details.
"""


def test_a_connect_that_timed_out_is_a_black_hole_link() -> None:
    data, conversion = scenario(("b.log", GLOG_TIMEOUT))
    (fault,) = data["fault"]
    assert (fault["kind"], fault["type"], fault["attributes"]) == (
        "toxic",
        "timeout",
        {"timeout": 0},
    )
    assert fault["nodes"] == [1]  # it could not reach the store: not the store host
    assert outcomes(data)[1] == "connection_error"
    assert outcomes(data)[0] == list(outcomes(data)[0])  # node 0 is not in the log: open
    assert data["timeouts"]["join"] == 1.0  # 60 s connect, a log spanning a minute: scaled
    assert any("black-hole" in a for a in conversion.plan.assumptions)


NO_ROUTE = """\
[rank2]:[W1203 14:02:11.123456789 socket.cpp:752] [c10d] The client socket has failed to connect to [10.20.0.1]:29500 (errno: 113 - No route to host).
[rank2]: torch.distributed.DistNetworkError: The client socket has failed to connect to any network address of (10.20.0.1, 29500). The last error was: No route to host
"""


def test_no_route_is_the_netns_worlds_host_unreachable() -> None:
    data, _ = scenario(("w.log", NO_ROUTE))
    assert data["world"] == "netns"
    (fault,) = data["fault"]
    assert (fault["kind"], fault["answer"]) == ("reject", "unreachable")
    assert outcomes(data)[fault["nodes"][0]] == "connection_error"


HOST_BRACKETED = """\
[2024-03-01 09:00:00,000] torch.distributed.elastic.rendezvous.c10d_rendezvous_backend: [INFO] Process 4000 hosts the TCP store for the C10d rendezvous backend.
[2024-03-01 09:00:00,010] torch.distributed.elastic.rendezvous.dynamic_rendezvous: [INFO] The node 'hq_4000_0' has joined round 0 of the rendezvous 'j' as rank 0 in a world of size 2.
[2024-03-01 09:15:00,010] torch.distributed.elastic.agent.server.api: [ERROR] torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError: the rendezvous timed out
"""
RESET_BRACKETED = """\
[2024-03-01 09:00:05,000] torch.distributed.elastic.rendezvous.dynamic_rendezvous: [INFO] The node 'hr_5000_0' attempts to join the next round of the rendezvous 'j'.
[2024-03-01 09:00:05,100] torch.distributed.elastic.rendezvous.c10d_rendezvous_backend: [ERROR] recvValue failed: Connection reset by peer
[2024-03-01 09:00:05,200] torch.distributed.elastic.agent.server.api: [ERROR] torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the C10d store has failed. Connection reset by peer
"""


def test_a_reset_while_the_store_host_was_up_is_a_reset_peer_toxic() -> None:
    data, _ = scenario(("a.log", HOST_BRACKETED), ("b.log", RESET_BRACKETED))
    assert "toxic" in kinds(data)
    toxic = data["fault"][kinds(data).index("toxic")]
    assert (toxic["type"], toxic["nodes"]) == ("reset_peer", [1])
    assert outcomes(data) == {0: "timeout", 1: "connection_error"}


ADDR_IN_USE = """\
[W socket.cpp:426] [c10d] The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use).
[W socket.cpp:426] [c10d] The server socket has failed to bind to 0.0.0.0:29500 (errno: 98 - Address already in use).
[E socket.cpp:462] [c10d] The server socket has failed to listen on any local network address.
torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use).
"""


def test_address_in_use_is_a_squatter_on_the_store_port() -> None:
    data, conversion = scenario(("host.log", ADDR_IN_USE))
    assert kinds(data) == ["squatter"] and data["fault"][0]["mode"] == "ipv4-wildcard"
    assert outcomes(data)[0] == "connection_error"
    assert "host.log:1:" in conversion.text


DNS = """\
[W socket.cpp:697] [c10d] The client socket has failed to connect to [master-0.svc.test]:29500 (errno: 22 - gai error: -2 - Name or service not known).
RuntimeError: The client socket has failed to connect to any network address of (master-0.svc.test, 29500). gai error: -2 - Name or service not known
"""


def test_a_name_that_does_not_resolve_is_a_dns_fault_on_that_name() -> None:
    data, _ = scenario(("w.log", DNS))
    assert data["endpoint"]["host"] == "master-0.svc.test"
    assert kinds(data) == ["dns"] and data["fault"][0]["nodes"] == [1]


BARRIER_SHORT = """\
[2024-04-04 12:30:00,101] torch.distributed.elastic.agent.server.api: [INFO] [default] Rendezvous complete for workers. Result:
  restart_count=0
  group_rank=1
  group_world_size=4
  local_ranks=[0, 1]
  global_ranks=[2, 3]
[2024-04-04 12:30:10,231] torch.distributed.distributed_c10d: [INFO] Waiting in store based barrier to initialize process group for rank: 2, key: store_based_barrier_key:1 (world_size=8, worker_count=6, timeout=0:30:00)
[rank2]: torch.distributed.DistStoreError: Timed out initializing process group in store based barrier on rank 2, for key: store_based_barrier_key:1 (world_size=8, num_workers_joined=6, timeout=0:30:00 error=Socket Timeout)
"""


def test_a_barrier_short_of_workers_means_missing_ranks() -> None:
    data, conversion = scenario(("n1.log", BARRIER_SHORT))
    assert data["nodes"] == 4 and kinds(data) == ["absent"]
    assert data["fault"][0]["nodes"] == [3]  # 2 of 8 workers at 2 per node: one node
    assert outcomes(data)[1] == "timeout"
    assert data["timeouts"]["join"] == 30.0  # the barrier's 30 min
    assert any("does not say which" in a for a in conversion.plan.assumptions)


BARRIER_OVER = BARRIER_SHORT.replace("worker_count=6", "worker_count=10").replace(
    "num_workers_joined=6", "num_workers_joined=10"
)


def test_a_barrier_over_the_world_size_means_stale_keys_after_a_restart() -> None:
    data, conversion = scenario(("n1.log", BARRIER_OVER))
    assert kinds(data) == ["restart"]
    assert any("over-count" in n for n in conversion.plan.not_reproduced)


KEY_WAIT = """\
I0501 10:00:00.000000 300 torch/distributed/elastic/agent/server/api.py:800] Rendezvous complete for workers. Result:
  group_rank=0
  group_world_size=4
E0501 10:05:00.000000 300 torch/distributed/distributed_c10d.py:100] wait timeout after 300000ms, keys: /default_pg/0//store_key/3
[rank0]: torch.distributed.DistStoreError: Timeout waiting for key: default_pg/0/rank_3 after 300000 ms
"""


def test_a_key_never_published_is_held_back_by_the_rank_it_names() -> None:
    data, _ = scenario(("n0.log", KEY_WAIT))
    (fault,) = data["fault"]
    assert (fault["kind"], fault["nodes"], fault["action"]) == ("store_op", [3], "drop")
    assert outcomes(data)[0] == "timeout" and outcomes(data)[3] == "timeout"


BOX = """\
[2024-01-05 14:27:49,000] torch.distributed.elastic.rendezvous.dynamic_rendezvous: [INFO] The node 'nodeA.example_876_0' has joined round 0 of the rendezvous 'r' as rank 1 in a world of size 2.
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2024-01-05_14:27:50
  host      : nodeA.example
  rank      : 2 (local_rank: 0)
  exitcode  : -9 (pid: 877)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 877
============================================================
"""


def test_the_childfailederror_box_with_sigkill_is_a_kill() -> None:
    data, _ = scenario(("n1.log", BOX))
    assert kinds(data) == ["kill"] and data["fault"][0]["nodes"] == [1]
    assert outcomes(data)[1] == "killed"


ERROR_FILE = """\
ERROR:torch.distributed.elastic.multiprocessing.errors.error_handler:{"message": {"message": "RendezvousTimeoutError: the rendezvous did not complete in time", "extraInfo": {"py_callstack": "Traceback ...", "timestamp": "1700000000"}}}
"""


def test_the_error_file_json_gives_the_error_class() -> None:
    data, _ = scenario(("n0.log", ERROR_FILE))
    assert outcomes(data)[0] == "timeout"


TORCH_EVENTS = """\
{"name": "torchelastic.worker.status.FAILED", "source": "AGENT", "timestamp": 0, "metadata": {"run_id": "x", "global_rank": null, "group_rank": 1, "worker_id": null, "role": "default", "hostname": "hb", "state": "FAILED", "total_run_time": 12, "rdzv_backend": "c10d", "raw_error": "Traceback...\\nRendezvousConnectionError: The connection to the C10d store has failed.", "metadata": "{}", "agent_restarts": 0}}
{"name": "RdzvEvent", "run_id": "x", "message": "The node 'hb_1_0' has joined round 0 of the rendezvous 'x' as rank 1 in a world of size 3.", "hostname": "hb", "pid": 1, "node_state": "RUNNING", "master_endpoint": "", "rank": 1, "local_id": 0, "error_trace": ""}
"""


def test_torchs_json_events_give_rank_world_size_and_failure() -> None:
    data, conversion = scenario(("events.log", TORCH_EVENTS))
    assert data["nodes"] == 3
    assert outcomes(data)[1] == "killed"  # a worker status FAILED: the node's end
    assert any(line.fmt == "plain" for line, _ in conversion.read)


HARNESS_REPORT = """\
scenario: f03 (scenarios/F03.toml)
node 0: timeout, after 3.001 s — rdzv.errors.RendezvousTimeoutError: rendezvous round 0 of run 'f03' at 127.0.0.1:5 timed out after 3.0 s: 2 of 3 nodes joined; missing ranks: 2. Start the missing nodes
node 1: timeout, after 3.002 s — rdzv.errors.RendezvousTimeoutError: rendezvous round 0 of run 'f03' at 127.0.0.1:5 timed out after 3.0 s: 2 of 3 nodes joined; missing ranks: 2. Start the missing nodes
node 2: absent
"""


def test_the_harness_report_names_every_nodes_outcome() -> None:
    data, _ = scenario(("junit-system-out.txt", HARNESS_REPORT))
    assert kinds(data) == ["absent"] and data["fault"][0]["nodes"] == [2]
    assert outcomes(data) == {0: "timeout", 1: "timeout", 2: "absent"}


def test_unknown_lines_are_skipped_and_counted() -> None:
    noise = "\n".join(["some banner", "epoch 1 loss 0.5", "#####"]) + "\n"
    _, conversion = scenario(("b.log", noise + GLOG_TIMEOUT))
    assert conversion.facts.unknown == 3
    assert "3 not understood (skipped)" in conversion.summary()[0]


def test_a_log_that_says_nothing_is_an_error_saying_what_is_missing() -> None:
    with pytest.raises(FromLogError, match="nothing in x.log .* says how a node ended"):
        convert([("x.log", "hello\nworld\n")])
    with pytest.raises(FromLogError, match="no node ending, no error and no missing rank"):
        convert(
            [
                (
                    "y.log",
                    "INFO:torch.distributed.elastic.rendezvous.dynamic_rendezvous:The node "
                    "'h_1_0' has joined round 0 of the rendezvous 'r' as rank 1 in a world of "
                    "size 2.\n",
                )
            ]
        )


def test_explain_traces_every_line_that_said_something() -> None:
    _, conversion = scenario(("b.log", GLOG_TIMEOUT))
    trace = conversion.trace()
    assert len(trace) == 4 and trace[2].startswith("b.log:3 [glog] cause")

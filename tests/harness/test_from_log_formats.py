"""The formats and error texts of ../shared/reference/torch-logs.md that the error-class
tests (test_from_log_errors.py) do not already read end to end: each log here is written
for the test, in one format, and converted to the scenario its failure needs."""

from __future__ import annotations

from test_from_log_errors import kinds, log, outcomes, scenario

from harness.logs import convert
from harness.logs.causes import outcome_of


def test_glog_with_a_name_that_timed_out_resolving_is_a_dns_fault_on_that_name() -> None:
    data, conversion = scenario(("w.log", log("eai-again-glog.log")))
    assert kinds(data) == ["dns"] and data["fault"][0]["nodes"] == [1]
    assert data["endpoint"]["host"] == "trainer-head.cluster.test"
    assert outcomes(data)[1] == "connection_error"
    assert conversion.facts.formats["glog"] == 3


def test_python_logging_with_network_unreachable_is_a_link_down_naming_the_assumption() -> None:
    data, conversion = scenario(("w.log", log("unreachable-py.log")))
    assert kinds(data) == ["link_down"] and data["fault"][0]["nodes"] == [1]
    assert outcomes(data)[1] == "connection_error"
    assert any("no routes to lose" in a for a in conversion.plan.assumptions)
    netns = convert([("w.log", log("unreachable-py.log"))], name="t", world="netns")
    assert [(f.entry["kind"], f.entry["answer"]) for f in netns.plan.faults] == [
        ("reject", "unreachable")
    ]


def test_old_c10d_lines_with_errno_110_are_a_black_hole_and_a_connection_error() -> None:
    data, conversion = scenario(("w.log", log("timedout-c10d-old.log")))
    (fault,) = data["fault"]
    assert (fault["kind"], fault["type"], fault["nodes"]) == ("toxic", "timeout", [1])
    # torch < 2.0 raised RuntimeError for a failed connect: still a connection error
    assert outcomes(data)[1] == "connection_error"
    assert conversion.facts.formats["c10d-cpp"] == 1


def test_a_runtime_error_is_classed_by_what_its_message_says() -> None:
    assert outcome_of("RuntimeError", "... The last error was: Connection refused") == (
        "connection_error"
    )
    assert outcome_of("RuntimeError", "Socket Timeout") == "timeout"
    assert outcome_of("RuntimeError", "CUDA out of memory") == "error"


def test_a_failed_rdzv_event_gives_the_rank_and_the_error_class_of_its_trace() -> None:
    data, conversion = scenario(("events.log", log("rdzv-event-failed.log")))
    assert data["nodes"] == 3
    assert outcomes(data)[2] == "closed"  # RendezvousClosedError, the trace's last line
    assert conversion.facts.node(2).outcome_line is not None
    assert conversion.facts.node(2).outcome_line.lineno == 2


def test_the_early_elastic_format_gives_the_launch_config_and_the_timeout() -> None:
    data, conversion = scenario(("n1.log", log("early-elastic.log")))
    assert conversion.facts.launcher == "torchrun" and conversion.facts.backend == "c10d"
    assert data["nodes"] == 2 and data["timeouts"]["join"] == 15.0  # 900 s -> 15 s
    assert outcomes(data)[1] == "timeout"  # rdzv_configs' rank 1
    assert conversion.facts.formats["elastic-early"] == 2


def test_torchs_dist_errors_are_classed_as_the_harness_classes_a_nodes_exception() -> None:
    timed_out = "The client socket has timed out after 20000ms while trying to connect to (h, 1)."
    assert outcome_of("torch.distributed.DistNetworkError", timed_out) == "connection_error"
    assert outcome_of("torch.distributed.DistStoreError", "wait timeout after 300000ms") == (
        "timeout"
    )


def test_a_node_that_logs_started_again_with_another_pid_is_restarted_after_its_join() -> None:
    data, _ = scenario(("node-1.log", log("restarted-node.log")))
    (fault,) = data["fault"]
    assert (fault["kind"], fault["nodes"], fault["on"], fault["on_node"]) == (
        "restart",
        [1],
        "joined",
        1,
    )
    assert fault["duration"] == 0.4  # from its last line (0.052 s) to the second start
    assert outcomes(data)[1] == "state_error"


def test_torch_2_4s_launch_configs_one_glog_line_an_item_give_the_shape_and_join_timeout() -> None:
    data, conversion = scenario(("c10d-node0.log", log("c10d-glog-launch.log")))
    facts = conversion.facts
    assert (facts.backend, facts.workers_per_node, facts.max_restarts) == ("c10d", 2, 0)
    assert data["nodes"] == 2
    assert data["timeouts"]["join"] == 15.0  # rdzv_configs' join_timeout, not its 'timeout'
    # node 0 timed out joining and says nothing else: node 1 never came (an assumption)
    assert kinds(data) == ["absent"] and data["fault"][0]["nodes"] == [1]
    assert outcomes(data) == {0: "timeout", 1: "absent"}


def test_a_c10d_log_without_join_timeout_assumes_c10ds_600_s_not_torchruns_timeout() -> None:
    # torchrun always logs rdzv_configs {'timeout': 900}; c10d's join reads join_timeout
    # (600 s by default), static's reads 'timeout'
    text = log("c10d-glog-launch.log").replace("'join_timeout': '15', ", "")
    c10d, conversion = scenario(("c10d-node0.log", text))
    said = [*conversion.plan.assumptions, *conversion.facts.assumptions]
    assert any("600 s" in a and "join_timeout" in a for a in said), said
    static, _ = scenario(("static-node0.log", text.replace(": c10d", ": static")))
    assert c10d["timeouts"]["join"] * 1.5 == static["timeouts"]["join"]  # 600 : 900, scaled


def test_rdzvs_join_start_states_the_join_timeout_a_member_deadline_message_does_not() -> None:
    # The hosting node names the missing ranks when another rank's deadline passes; that
    # message does not name the join timeout (it is that rank's), so the reader takes it from
    # every node's join_start event. Without it, rdzv's default (600 s) is assumed.
    failed = (
        "[2026-01-01 00:00:02,400] rdzv.rendezvous: [WARNING] failed: rendezvous round 0 of "
        "run 'r' at 127.0.0.1:5 timed out when the join deadline of rank 2 passed (after "
        "2.4 s here): 2 of 3 nodes joined; missing ranks: 1.\n"
    )
    start = (
        "[2026-01-01 00:00:00,000] rdzv.rendezvous: [INFO] join_start run_id='r' round=0 "
        "rank={rank} endpoint='127.0.0.1:5' elapsed=0.0 world_size=3 join_timeout=2.4\n"
    )
    logs = [(f"node-{r}.log", start.format(rank=r) + failed) for r in (0, 2)]
    data, conversion = scenario(*logs)
    assert data["timeouts"]["join"] == 2.4
    assert not [a for a in conversion.facts.assumptions if "timeout" in a]
    bare = [(name, text.replace(" join_timeout=2.4", "")) for name, text in logs]
    data, conversion = scenario(*bare)
    assert any("no line states a timeout" in a for a in conversion.facts.assumptions)


def test_the_waits_after_a_verdict_are_no_cause_of_the_round() -> None:
    # node 0's linger for the acks after a failed round timed out: a wait of its own, not a
    # key the round waited for in vain (read as one, it planted a held claim on node 2)
    start = (
        "[2026-01-01 00:00:00,000] rdzv.rendezvous: [INFO] join_start run_id='r' round=0 "
        "rank={rank} endpoint='127.0.0.1:5' elapsed=0.0 world_size=3 join_timeout=2.4\n"
    )
    failed = (
        "[2026-01-01 00:00:02,400] rdzv.rendezvous: [WARNING] failed: rendezvous round 0 of "
        "run 'r' at 127.0.0.1:5 timed out after 2.4 s: 2 of 3 nodes joined; missing ranks: 1.\n"
    )
    linger = (
        "[2026-01-01 00:00:04,804] rdzv.rendezvous: [INFO] linger_ended run_id='r' round=0 "
        "rank=0 endpoint='127.0.0.1:5' elapsed=4.8 error='StoreTimeoutError: wait timeout "
        "after 2400ms, keys: /__rdzv__/r/round/0/ack/0, /__rdzv__/r/round/0/ack/2 (store at "
        "127.0.0.1:5)'\n"
    )
    logs = [("node-0.log", start.format(rank=0) + failed + linger)]
    logs += [("node-2.log", start.format(rank=2) + failed)]
    data, conversion = scenario(*logs)
    assert not [c for n in conversion.facts.nodes for c in n.causes], conversion.text
    assert kinds(data) == ["absent"] and data["fault"][0]["nodes"] == [1]

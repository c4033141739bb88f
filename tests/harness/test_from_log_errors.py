"""One test per error class: a log (written for the test in one of torch's formats, after
the patterns of ../shared/reference/torch-logs.md) -> the fault ``from-log`` infers, with the
lines it quotes; and the structured inputs (error file, ChildFailedError box, torch's and
rdzv's events, the harness's reports)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from harness.logs import Conversion, FromLogError, convert

LOGS = Path(__file__).with_name("from_log_logs")


def log(name: str) -> str:
    """A log written for these tests (tests/harness/from_log_logs/)."""
    return (LOGS / name).read_text(encoding="utf-8")


def scenario(*logs: tuple[str, str]) -> tuple[dict[str, Any], Conversion]:
    conversion = convert(list(logs), name="t")
    return tomllib.loads(conversion.text), conversion


def kinds(data: dict[str, Any]) -> list[str]:
    return [f["kind"] for f in data.get("fault", [])]


def outcomes(data: dict[str, Any]) -> dict[int, Any]:
    return {n: e["outcome"] for e in data["expect"]["nodes"] for n in e["nodes"]}


REFUSED_PY = log("refused-py.log")


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


RDZV_EVENTS = log("rdzv-events.log")
RDZV_REFUSED = log("rdzv-refused.log")


def test_refused_while_the_store_listened_is_a_link_that_is_down() -> None:
    data, conversion = scenario(("a.log", RDZV_EVENTS), ("b.log", RDZV_REFUSED))
    assert kinds(data) == ["link_down"] and data["fault"][0]["nodes"] == [1]
    assert outcomes(data) == {0: "timeout", 1: "connection_error"}
    assert data["timeouts"]["join"] == 30.0
    assert conversion.facts.backend == "rdzv"
    timeout_entry = next(e for e in data["expect"]["nodes"] if e["nodes"] == [0])
    assert timeout_entry["message"] == "missing ranks: 1\\b"


GLOG_TIMEOUT = log("glog-timeout.log")


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


NO_ROUTE = log("no-route.log")


HOST_BRACKETED = log("host-bracketed.log")
RESET_BRACKETED = log("reset-bracketed.log")


def test_a_reset_while_the_store_host_was_up_is_a_reset_peer_toxic() -> None:
    data, _ = scenario(("a.log", HOST_BRACKETED), ("b.log", RESET_BRACKETED))
    assert "toxic" in kinds(data)
    toxic = data["fault"][kinds(data).index("toxic")]
    assert (toxic["type"], toxic["nodes"]) == ("reset_peer", [1])
    assert outcomes(data) == {0: "timeout", 1: "connection_error"}


ADDR_IN_USE = log("addr-in-use.log")


def test_address_in_use_is_a_squatter_on_the_store_port() -> None:
    data, conversion = scenario(("host.log", ADDR_IN_USE))
    assert kinds(data) == ["squatter"] and data["fault"][0]["mode"] == "ipv4-wildcard"
    assert outcomes(data)[0] == "connection_error"
    assert "host.log:1:" in conversion.text


DNS = log("dns.log")


def test_a_name_that_does_not_resolve_is_a_dns_fault_on_that_name() -> None:
    data, _ = scenario(("w.log", DNS))
    assert data["endpoint"]["host"] == "master-0.svc.test"
    assert kinds(data) == ["dns"] and data["fault"][0]["nodes"] == [1]


BARRIER_SHORT = log("barrier-short.log")


def test_a_barrier_short_of_workers_holds_back_the_last_workers_of_a_job() -> None:
    data, conversion = scenario(("n1.log", BARRIER_SHORT))
    # every agent's rendezvous completed (group_world_size=4): the job's workers are missing
    assert data["nodes"] == 4 and data["job"]["nproc_per_node"] == 2
    assert [(f["kind"], f["nodes"], f["part"]) for f in data["fault"]] == [
        ("pause", [3], "worker 0"),
        ("pause", [3], "worker 1"),
    ]
    assert outcomes(data)[1] == "error"  # its worker timed out: its agent fails the job
    assert data["job"]["process_group_timeout"] == 30.0  # the barrier's 30 min
    assert any("names none" in a for a in conversion.plan.assumptions)


BARRIER_OVER = BARRIER_SHORT.replace("worker_count=6", "worker_count=10").replace(
    "num_workers_joined=6", "num_workers_joined=10"
)


def test_a_barrier_over_the_world_size_is_named_as_stale_keys_not_reproduced() -> None:
    data, conversion = scenario(("n1.log", BARRIER_OVER))
    assert kinds(data) == []
    assert any("stale keys" in n for n in conversion.plan.not_reproduced)


KEY_WAIT = log("key-wait.log")


def test_a_key_never_published_is_held_back_by_the_worker_of_the_rank_it_names() -> None:
    data, _ = scenario(("n0.log", KEY_WAIT))
    (fault,) = data["fault"]
    assert (fault["kind"], fault["nodes"], fault["part"]) == ("pause", [3], "worker 0")
    assert fault["duration"] > data["job"]["process_group_timeout"]
    assert outcomes(data)[0] == "error"


BOX = log("box.log")


def test_the_childfailederror_box_with_sigkill_is_a_kill() -> None:
    data, _ = scenario(("n1.log", BOX))
    assert kinds(data) == ["kill"] and data["fault"][0]["nodes"] == [1]
    assert outcomes(data)[1] == "killed"


ERROR_FILE = log("error-file.log")


def test_the_error_file_json_gives_the_error_class() -> None:
    data, _ = scenario(("n0.log", ERROR_FILE))
    assert outcomes(data)[0] == "timeout"


TORCH_EVENTS = log("torch-events.log")


def test_torchs_json_events_give_rank_world_size_and_failure() -> None:
    data, conversion = scenario(("events.log", TORCH_EVENTS))
    assert data["nodes"] == 3
    assert outcomes(data)[1] == "connection_error"  # the FAILED status's raw_error
    assert any(line.fmt == "plain" for line, _ in conversion.read)


HARNESS_REPORT = log("harness-report.log")


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
    with pytest.raises(FromLogError, match=r"nothing in x\.log .* says how a node ended"):
        convert([("x.log", "hello\nworld\n")])
    with pytest.raises(FromLogError, match="no node ending, no error and no missing rank"):
        convert([("y.log", log("joined-only.log"))])


def test_explain_traces_every_line_that_said_something() -> None:
    _, conversion = scenario(("b.log", GLOG_TIMEOUT))
    trace = conversion.trace()
    assert len(trace) == 4 and trace[2].startswith("b.log:3 [glog] cause")


def test_the_store_servers_count_of_clients_names_the_missing_nodes() -> None:
    data, conversion = scenario(("host.log", log("clients-joined.log")))
    assert data["nodes"] == 4 and kinds(data) == ["absent"]
    assert data["fault"][0]["nodes"] == [3]  # one short; the log shows only node 0
    assert any("workers per node: one" in a for a in conversion.facts.assumptions)


def test_a_junit_report_of_the_harness_is_read_with_its_xml_escapes() -> None:
    data, conversion = scenario(("report.xml", log("junit-report.xml")))
    assert kinds(data) == ["absent"] and data["fault"][0]["nodes"] == [1]
    assert outcomes(data) == {0: "timeout", 1: "absent", 2: "timeout"}
    assert data["timeouts"]["join"] == 3.0
    assert "report.xml:9:" in conversion.text  # the absent node's own line is quoted


def test_an_exit_code_of_one_in_the_box_is_the_error_not_a_kill() -> None:
    text = (
        log("box.log")
        .replace("exitcode  : -9", "exitcode  : 1")
        .replace("Signal 9 (SIGKILL) received by PID 877", "/tmp/err.json")
    )
    text += "torch.distributed.DistNetworkError: Connection reset by peer\n"
    data, _ = scenario(("n1.log", text))
    assert "kill" not in kinds(data)
    assert outcomes(data)[1] == "connection_error"


def test_two_nodes_glog_lines_interleaved_in_one_file_come_apart_by_pid() -> None:
    data, conversion = scenario(("both.log", log("interleaved-glog.log")))
    assert data["nodes"] == 3
    assert outcomes(data)[0] == "timeout" and outcomes(data)[1] == "timeout"
    # both timed out joining and said nothing else: node 2, not in the log, never came
    assert kinds(data) == ["absent"] and data["fault"][0]["nodes"] == [2]
    assert any("[2], never started" in a for a in conversion.plan.assumptions)
    assert data["timeouts"]["join"] == 15.0  # 15 minutes from the first line: 900 s, scaled


def test_rdzv_events_of_several_nodes_in_one_file_come_apart_by_rank() -> None:
    data, _ = scenario(("all.log", log("interleaved-rdzv.log")))
    assert data["nodes"] == 3
    assert kinds(data) == ["absent"] and data["fault"][0]["nodes"] == [1]  # rdzv: all log
    assert outcomes(data) == {0: "timeout", 1: "absent", 2: "timeout"}


def test_a_world_beyond_one_machine_is_scaled_to_1024_nodes_keeping_the_missing_one() -> None:
    data, conversion = scenario(("w17.log", log("scale-4096.log")))
    assert data["nodes"] == 1024 and data["timeouts"]["join"] == 15.0
    assert kinds(data) == ["absent"] and data["fault"][0]["nodes"] == [1000]  # 4000 * 1024 // 4096
    assert outcomes(data)[4] == "timeout"  # node 17 of the log
    assert any("4096 nodes do not fit one machine" in a for a in conversion.plan.assumptions)


def test_torchruns_tee_lines_and_restarts_give_a_job_whose_worker_crashes() -> None:
    data, conversion = scenario(("n1.log", log("tee-restarts.log")))
    assert conversion.facts.launcher == "torchrun" and conversion.facts.backend == "c10d"
    # the workers ran (and failed, and restarted): a job of 2 workers per node, 3 restarts
    assert data["nodes"] == 2 and outcomes(data)[1] == "ok"
    assert data["job"] == {"nproc_per_node": 2, "max_restarts": 3}
    (crash,) = data["fault"]
    assert (crash["kind"], crash["nodes"], crash["part"]) == ("kill", [1], "worker 0")
    assert "#   n1.log:14: [default0]:RuntimeError: CUDA error" in conversion.text

"""One test per log format: :func:`harness.logs.lines.classify` names the format and finds
the message, the level, the process and the clock. Every line here is written for this test,
following the shapes in ../shared/reference/torch-logs.md (hosts, pids and times invented).
"""

from __future__ import annotations

import pytest

from harness.logs.lines import classify


def test_python_default_logging_has_level_and_logger_but_no_time() -> None:
    line = classify(
        "WARNING:torch.distributed.elastic.rendezvous.dynamic_rendezvous:The node "
        "'hostq.lab_2207_0' has failed to shutdown the rendezvous 'run7' due to an error"
    )
    assert line is not None
    assert (line.fmt, line.level, line.when) == ("python-logging", "WARNING", None)
    assert line.logger == "torch.distributed.elastic.rendezvous.dynamic_rendezvous"
    assert line.text.startswith("The node 'hostq.lab_2207_0'")


def test_the_bracketed_date_format_is_dated_to_the_millisecond() -> None:
    first = classify(
        "[2024-05-06 10:00:01,250] torch.distributed.elastic.multiprocessing.api: [WARNING] "
        "Sending process 5120 closing signal SIGTERM"
    )
    second = classify(
        "[2024-05-06 10:00:03,000] torch.distributed.elastic.multiprocessing.api: [ERROR] "
        "failed (exitcode: 1) local_rank: 0 (pid: 5121) of binary: /usr/bin/python3"
    )
    assert first is not None and second is not None
    assert (first.fmt, first.level) == ("bracketed-date", "WARNING")
    assert first.when is not None and second.when is not None
    assert second.when - first.when == pytest.approx(1.75)


def test_the_glog_format_carries_the_pid_and_a_yearless_time() -> None:
    line = classify(
        "W1103 23:59:59.500000 7781 torch/distributed/elastic/agent/server/api.py:719] "
        "Received 15 death signal, shutting down workers"
    )
    later = classify(
        "I1104 00:00:00.750000 7781 torch/distributed/run.py:660] Using nproc_per_node=2."
    )
    assert line is not None and later is not None
    assert (line.fmt, line.level, line.pid) == ("glog", "WARNING", 7781)
    assert line.logger == "torch/distributed/elastic/agent/server/api.py"
    assert later.when is not None and line.when is not None
    assert later.when - line.when == pytest.approx(1.25)  # across midnight


def test_the_elastic_early_format_puts_the_level_first() -> None:
    line = classify(
        "[INFO] 2021-10-02 08:15:00,100 api: Starting elastic_operator with launch configs:"
    )
    assert line is not None
    assert (line.fmt, line.level, line.logger) == ("elastic-early", "INFO", "api")


@pytest.mark.parametrize(
    ("raw", "dated"),
    [
        (
            "[W socket.cpp:558] [c10d] The server socket has failed to listen on any address.",
            False,
        ),
        (
            "[E1203 14:02:11.123456789 socket.cpp:1011] [c10d] The client socket failed.",
            True,
        ),
    ],
    ids=["old", "dated"],
)
def test_c10d_cpp_lines_old_and_dated(raw: str, dated: bool) -> None:
    line = classify(raw)
    assert line is not None
    assert line.fmt == "c10d-cpp" and line.logger == "socket.cpp"
    assert (line.when is not None) is dated
    assert line.text.startswith("[c10d]")


def test_a_workers_rank_prefix_is_peeled_and_kept() -> None:
    line = classify(
        "[rank6]:[E0218 09:30:00.000000001 ProcessGroupGloo.cpp:143] Gloo connectFullMesh failed"
    )
    assert line is not None
    assert (line.rank, line.fmt, line.level) == (6, "c10d-cpp", "ERROR")


def test_torchruns_tee_prefix_gives_the_local_rank() -> None:
    line = classify("[trainer3]:[rank11]: RuntimeError: the worker could not start")
    assert line is not None
    assert (line.local_rank, line.rank, line.fmt) == (3, 11, "plain")
    assert line.text == "RuntimeError: the worker could not start"


def test_nccl_lines_name_host_pid_and_device() -> None:
    line = classify("gpu-n4:9911:9911 [2] NCCL INFO Bootstrap : Using ib0:192.0.2.44<0>")
    assert line is not None
    assert (line.fmt, line.host, line.pid) == ("nccl", "gpu-n4", 9911)


def test_scheduler_lines_are_recognised() -> None:
    line = classify("srun: error: gpu-n5: task 3: Exited with exit code 1")
    assert line is not None and line.fmt == "scheduler"


def test_the_harness_reports_node_lines_name_node_and_outcome() -> None:
    line = classify(
        "node 2: connection_error, after 2.016 s — rdzv.errors.RendezvousConnectionError: "
        "rank 2 (join timeout 2 s): no rendezvous store answered"
    )
    assert line is not None
    assert (line.fmt, line.node, line.status, line.elapsed) == (
        "harness-report",
        2,
        "connection_error",
        2.016,
    )
    event = classify("  0.002-1.861 s connect_attempt x8: StoreClosedError: connection reset")
    assert event is not None and (event.fmt, event.event) == ("harness-event", "connect_attempt")


def test_blank_lines_are_nothing_and_any_text_is_plain() -> None:
    assert classify("   ") is None
    line = classify("\x00 some ☃ binary-ish garbage ]]] [[[")
    assert line is not None and line.fmt == "plain"

"""The final connect error says what the network did: refused, reset, no answer, no route.

The causes are fed in at the dial (the kernel's errors as the socket raises them); the
netns world's scenarios make "no answer" and "no route" real (tests/netns/).
"""

from __future__ import annotations

import errno
import random
import socket

import pytest

from rdzv.errors import StoreConnectionError
from rdzv.store import _connect, _wire


def _fail_with(monkeypatch: pytest.MonkeyPatch, error: BaseException) -> str:
    def dial(host: str, port: int, deadline: float | None) -> socket.socket:
        raise error

    monkeypatch.setattr(_connect, "_dial", dial)
    with pytest.raises(StoreConnectionError) as info:
        _connect.connect("198.18.0.10", 29500, 0.05, random.Random(1), _wire.Limits())
    return str(info.value)


def test_a_refused_connect_is_called_refused_and_says_nothing_listens(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    message = _fail_with(monkeypatch, ConnectionRefusedError(errno.ECONNREFUSED, "refused"))
    assert "(refused: the host answered but nothing listens on that port" in message


def test_a_reset_connect_is_called_reset(monkeypatch: pytest.MonkeyPatch) -> None:
    message = _fail_with(monkeypatch, ConnectionResetError(errno.ECONNRESET, "reset"))
    assert "(reset: the host, or something on the path" in message


def test_a_connect_without_any_answer_says_filtered_or_host_down(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    message = _fail_with(monkeypatch, _connect._NoAnswer("no answer within 0.05 s"))
    assert "last cause: no answer within 0.05 s" in message
    assert "no answer to the connection attempt" in message
    assert "a filtered port?" in message and "the host is down" in message
    assert "_NoAnswer" not in message


@pytest.mark.parametrize("code", [errno.EHOSTUNREACH, errno.ENETUNREACH])
def test_an_unreachable_address_is_called_no_route(
    monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    message = _fail_with(monkeypatch, OSError(code, "unreachable"))
    assert "(no route to the host: this node cannot reach that address" in message


def test_a_dial_that_times_out_reports_no_answer_not_a_bare_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def connect(self: socket.socket, address: object) -> None:
        raise TimeoutError("timed out")

    monkeypatch.setattr(socket.socket, "connect", connect)
    with pytest.raises(_connect._NoAnswer, match=r"no answer to the connection attempt within"):
        _connect._dial("127.0.0.1", 9, None)

"""The errors a call of the Toxiproxy API ends in, as
:class:`~harness.proxy.client.ToxiproxyClient` raises them: each names the server, the
request and what went wrong, in the server's words where it gave any (translated once, here,
from ``requests``' and toxiproxy-python's).

* :func:`refused`: the server answered with an HTTP error: the
  :class:`~harness.errors.ProxyApiError` subclass of its status (400, 404, 409, 500), its
  ``error`` text, or a line of a body that is not Toxiproxy's JSON;
* :func:`unreached`: no answer: :class:`~harness.errors.ToxiproxyTimeoutError` or
  :class:`~harness.errors.ToxiproxyUnreachableError`, with the socket's words
  (``connection refused``) dug out from under ``requests``' and urllib3's wrappers.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

import requests

from harness.errors import (
    AlreadyExistsError,
    InvalidRequestError,
    NotFoundError,
    ProxyApiError,
    ProxyStartError,
    ToxiproxyTimeoutError,
    ToxiproxyUnreachableError,
)

__all__ = ["refused", "unreached"]

_BY_STATUS: Mapping[int, type[ProxyApiError]] = MappingProxyType(
    {400: InvalidRequestError, 404: NotFoundError, 409: AlreadyExistsError, 500: ProxyStartError}
)


#: How much of an error body that is not Toxiproxy's JSON a message shows.
_SHOWN = 160


def _why(exc: BaseException) -> str:
    """The socket error under requests' and urllib3's wrappers, in a few words
    (``connection refused``), else the first line of the outermost message."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        err = todo.pop(0)
        if err is None or id(err) in seen:
            continue
        seen.add(id(err))
        if isinstance(err, OSError) and err.strerror:
            return err.strerror[:1].lower() + err.strerror[1:]
        reason = getattr(err, "reason", None)
        nested = [a for a in err.args if isinstance(a, BaseException)]
        todo += [err.__cause__, err.__context__, *nested]
        if isinstance(reason, BaseException):
            todo.append(reason)
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def refused(url: str, method: str, path: str, response: requests.Response) -> ProxyApiError:
    """What the server at ``url`` said, answering ``method path`` with an HTTP error."""
    try:
        detail = str(response.json()["error"])
    except (ValueError, KeyError, TypeError):
        detail = " ".join(response.text.split())  # not Toxiproxy's JSON: one line of it
    kind = _BY_STATUS.get(response.status_code, ProxyApiError)
    said = f": {detail}" if detail else " with an empty body"
    if detail.startswith("<"):  # a web page: some other HTTP server answered
        said = " with a web page, not Toxiproxy's JSON: is a Toxiproxy server there?"
    elif len(detail) > _SHOWN:
        said = f": {detail[: _SHOWN - 1]}…"
    message = f"toxiproxy at {url} refused {method} {path}: HTTP {response.status_code}"
    return kind(message + said, status=response.status_code, detail=detail)


def unreached(url: str, timeout: float, method: str, path: str, exc: Exception) -> Exception:
    """Why ``method path`` got no answer from the server at ``url`` (``exc``: ``requests``'
    error): it timed out after ``timeout`` seconds, or nothing could be reached."""
    if isinstance(exc, requests.Timeout):
        return ToxiproxyTimeoutError(
            f"toxiproxy at {url} did not answer {method} {path} within {timeout} s"
        )
    hint = "is the server running there?"
    return ToxiproxyUnreachableError(
        f"cannot reach toxiproxy at {url} for {method} {path}: {_why(exc)}; {hint}"
    )

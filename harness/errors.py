"""The harness's exception tree.

Every error the harness raises derives from :class:`HarnessError`::

    HarnessError
    ├── ProxyApiError                  a fault-proxy request was refused; ``status`` is the
    │   │                              Toxiproxy HTTP status, ``detail`` the server's words
    │   ├── InvalidRequestError        400, also ValueError: bad body, missing field, bad
    │   │                              stream, unknown toxic type, bad attribute (caller's fault)
    │   ├── NotFoundError              404, also LookupError: no such proxy or toxic
    │   ├── AlreadyExistsError         409: the proxy or toxic name is taken
    │   └── ProxyStartError            500: a proxy listener could not start (bind, resolve)
    ├── ToxiproxyUnreachableError      also ConnectionError: nothing answers at the API address
    ├── ToxiproxyTimeoutError          also TimeoutError: the API server did not answer in time
    ├── ToxiproxyProtocolError         the server answered something that is not Toxiproxy's API
    ├── UnsupportedError               a world cannot do what a scenario asks of it (e.g.
    │                                  toxics in a world whose links are kernel rules)
    ├── InternalError                  a bug in the harness: it raised what it did not expect
    │                                  (the report says so, and where the traceback is)
    ├── BackendError                   the user's backend (``module:factory``) raised in the
    │                                  harness, outside any node: the user's code to fix
    └── ScenarioError                  also ValueError: a scenario file is invalid (names the
        │                              file and every bad key)
        └── InvalidScenariosError      loading many files: one ScenarioError per bad file

Server-side code (``harness.proxy``: ``proxies``, ``toxics``, ``api``) raises the
``ProxyApiError`` family with Toxiproxy's own error text as the message, so the HTTP layer can
put it in the body unchanged. The client (``harness.proxy.client``) raises the same classes
with a message that also names the server, the request and the status.

Every layer may import this module; it imports nothing of the harness.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "AlreadyExistsError",
    "BackendError",
    "HarnessError",
    "InternalError",
    "InvalidRequestError",
    "InvalidScenariosError",
    "NotFoundError",
    "ProxyApiError",
    "ProxyStartError",
    "ScenarioError",
    "ToxiproxyProtocolError",
    "ToxiproxyTimeoutError",
    "ToxiproxyUnreachableError",
    "UnsupportedError",
]


class HarnessError(Exception):
    """Base class of every error raised by the harness."""


class ProxyApiError(HarnessError):
    """A request to the fault proxy's control plane was refused.

    Attributes:
        status: the HTTP status Toxiproxy uses for this failure.
        detail: the server's own error text (Toxiproxy's wording).
    """

    default_status = 500

    def __init__(self, message: str, *, status: int | None = None, detail: str | None = None):
        super().__init__(message)
        self.status = self.default_status if status is None else status
        self.detail = message if detail is None else detail


class InvalidRequestError(ProxyApiError, ValueError):
    """The request itself is wrong (HTTP 400): the caller must fix the request."""

    default_status = 400


class NotFoundError(ProxyApiError, LookupError):
    """The named proxy or toxic does not exist (HTTP 404)."""

    default_status = 404


class AlreadyExistsError(ProxyApiError):
    """A proxy or toxic with that name already exists (HTTP 409)."""

    default_status = 409


class ProxyStartError(ProxyApiError):
    """A proxy's listener could not start, e.g. its port is in use (HTTP 500).

    The message is the listen error in Toxiproxy's words, e.g.
    ``listen tcp 127.0.0.1:3310: bind: address already in use``.
    """

    default_status = 500


class ToxiproxyUnreachableError(HarnessError, ConnectionError):
    """Nothing answered at the Toxiproxy API address (the server is not running there)."""


class ToxiproxyTimeoutError(HarnessError, TimeoutError):
    """The Toxiproxy API server accepted the request but did not answer in time."""


class ToxiproxyProtocolError(HarnessError):
    """The server answered, but not the way the Toxiproxy API does (wrong shape or status)."""


class UnsupportedError(HarnessError):
    """A world was asked for something it cannot do ("the local world cannot drop, reject or
    lose packets between nodes"): the scenario cannot run in that world (a skip, not a
    failure; the skip names the world as its cause).

    Attributes:
        world: the world's name (``local``, ...).
        capability: what it lacks (one of :data:`harness.world.base.CAPABILITIES`, or a
            name a fault kind of its own asks for).
    """

    def __init__(self, message: str, *, world: str, capability: str) -> None:
        super().__init__(message)
        self.world = world
        self.capability = capability


class InternalError(HarnessError):
    """A bug in the harness: an exception it did not expect while running a scenario (not
    the scenario's verdict, not the world's or the proxy's refusal). Report it, with the
    traceback the report names."""


class BackendError(HarnessError):
    """The scenario's own backend (``module:factory``: the user's code) raised inside the
    harness, outside any node (a node's failure is its outcome instead): fix the backend."""


class ScenarioError(HarnessError, ValueError):
    """A scenario file cannot be used; the caller must fix the file.

    Attributes:
        source: the file (or other origin) of the scenario.
        problems: one line per problem, each naming the key path and what is allowed.
    """

    def __init__(self, source: str, problems: Sequence[str]) -> None:
        self.source = source
        self.problems = tuple(problems)
        listed = "; ".join(self.problems) or "invalid"
        super().__init__(f"{source}: {listed}")


class InvalidScenariosError(ScenarioError):
    """Some of the scenario files loaded together cannot be used; every one is named.

    Attributes:
        errors: one :class:`ScenarioError` per bad file (or path that names nothing).
        files: how many files were read.
        source, problems: as for :class:`ScenarioError`: ``source`` names the bad files,
            ``problems`` holds every problem prefixed with its file.
    """

    def __init__(self, errors: Sequence[ScenarioError], files: int) -> None:
        self.errors = tuple(errors)
        self.files = files
        sources = ", ".join(e.source for e in self.errors)
        problems = [f"{e.source}: {p}" for e in self.errors for p in e.problems]
        super().__init__(sources, problems)
        self.args = ("\n".join(str(e) for e in self.errors),)

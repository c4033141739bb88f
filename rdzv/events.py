"""Structured events: what rdzv did, as log records a harness can collect.

Every event is an ordinary :mod:`logging` record on a logger under ``rdzv`` whose message
is the event name and whose ``rdzv_event`` attribute is a dict: ``{"event": name, **fields}``.
Collect them with :class:`EventCollector` (a ``logging.Handler``) or any handler that reads
``record.rdzv_event``. Fields are plain JSON-friendly values (str, int, float, bool, None).

Event names used by rdzv:

* ``connect_attempt`` (store client): ``endpoint``, ``attempt``, ``error`` (None on success)
* ``connected`` (store client): ``endpoint``, ``attempts``, ``elapsed``
* ``server_listening`` (store server): ``endpoint``, ``addresses``
* ``bind_fallback`` (store server): ``host``, ``reason``, ``addresses``
* ``store_client_cut`` (store server, WARNING): ``peer``, ``bound``, ``message``: a bound cut a
  connection that had spoken the protocol (see docs/store.md)
* ``store_connection_dropped`` (store server, WARNING): ``peer``, ``message``: a connection
  that broke the protocol was dropped (the first few of a burst);
  ``store_connections_dropped`` (``message``): the summary of the rest
* rendezvous events (``joined``, ``complete``, ``failed``, ...) are documented in
  :mod:`rdzv.rendezvous.static`.

rdzv is a library: its top logger ``rdzv`` has a :class:`logging.NullHandler`, so with logging
unconfigured nothing reaches stderr (not even warnings); an application that configures
logging sees each record as a line: the event's name and its ``message`` when it has one
(``exit_wait_ended: rank 3 did not call shutdown() ...``), else its fields as
``name=value`` (``member_lost run_id='job-1' round=0 rank=0 ... lost_rank=2``).

rdzv never imports :mod:`logging` itself (it is about 5 ms of every node's import line): a
record reaches a handler only if the application configured logging, and an application
that configured logging has imported it. So rdzv's modules take their loggers from
:func:`get_logger`, a :class:`Logger` that finds ``logging`` in ``sys.modules`` the first
time it is asked for a record, makes the real logger then (and puts the ``NullHandler`` on
``rdzv``), and until then answers that nobody listens. The order of ``import logging``,
``import rdzv`` and ``logging.basicConfig`` makes no difference to what is logged. Levels
are the plain ints :data:`DEBUG` .. :data:`ERROR` (the values of ``logging``'s).
"""

from __future__ import annotations

import sys
import threading

TYPE_CHECKING = False
if TYPE_CHECKING:
    import logging
    from typing import Any, Final

    from rdzv._event_collector import EventCollector

__all__ = [
    "COPY_ATTR",
    "DEBUG",
    "ERROR",
    "EVENT_ATTR",
    "INFO",
    "WARNING",
    "EventCollector",
    "Logger",
    "emit",
    "get_logger",
]

EVENT_ATTR: Final = "rdzv_event"
#: Set (True) on a copy of an rdzv record logged again on another logger (the torchrun
#: plugin shows rdzv's events on torch's): a handler on both loggers skips the copy.
COPY_ATTR: Final = "rdzv_copy"

#: ``logging``'s level numbers, without importing it.
DEBUG: Final = 10
INFO: Final = 20
WARNING: Final = 30
ERROR: Final = 40

_TOP: Final = "rdzv"
_null_handler_lock = threading.Lock()
_null_handler_added = False


def _add_null_handler(logging_mod: Any) -> None:
    """Put a ``NullHandler`` on ``rdzv`` once: output is the application's choice, so no
    "last resort" lines from a library."""
    global _null_handler_added  # noqa: PLW0603 (one flag for the process)
    with _null_handler_lock:
        if not _null_handler_added:
            logging_mod.getLogger(_TOP).addHandler(logging_mod.NullHandler())
            _null_handler_added = True


def _logging_module() -> Any:
    """``logging`` if the application imported it, else None (also while another thread is
    still importing it: ``captureWarnings`` is the last name its module defines)."""
    module = sys.modules.get("logging")
    if module is None or not hasattr(module, "captureWarnings"):
        return None
    return module


class Logger:
    """A logger under ``rdzv`` by name; the real :class:`logging.Logger` is made the first
    time a record is asked for once ``logging`` has been imported (by anyone)."""

    __slots__ = ("_real", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self._real: logging.Logger | None = None

    def real(self) -> logging.Logger | None:
        """The :class:`logging.Logger`, or None while ``logging`` was never imported."""
        real = self._real
        if real is None:
            logging_mod = _logging_module()
            if logging_mod is None:
                return None
            _add_null_handler(logging_mod)
            real = self._real = logging_mod.getLogger(self.name)
        return real

    def isEnabledFor(self, level: int) -> bool:
        """Whether a record at ``level`` would be handled (False without ``logging``)."""
        real = self.real()
        return real is not None and real.isEnabledFor(level)

    def log(self, level: int, msg: str, *args: Any, **kwargs: Any) -> None:
        """``logging.Logger.log``, the caller shown as the record's origin."""
        real = self.real()
        if real is not None:
            kwargs.setdefault("stacklevel", 2)
            real.log(level, msg, *args, **kwargs)

    def warning(self, msg: str, *args: Any, **kwargs: Any) -> None:
        """``logging.Logger.warning``, the caller shown as the record's origin."""
        self.log(WARNING, msg, *args, stacklevel=3, **kwargs)

    def exception(self, msg: str, *args: Any, **kwargs: Any) -> None:
        """``logging.Logger.exception``: an ERROR record with the exception being handled."""
        kwargs.setdefault("exc_info", True)
        self.log(ERROR, msg, *args, stacklevel=3, **kwargs)


_loggers: dict[str, Logger] = {}


def get_logger(name: str) -> Logger:
    """rdzv's logger ``name`` (one object per name); the only way rdzv's modules log.

    If ``logging`` is already imported, the real logger is made at once (at the caller's
    import, not in the first join that logs) and the ``NullHandler`` goes on ``rdzv``: a
    module imported after ``logging`` (the store server imports it) leaves no window in
    which a record of its own could reach logging's last-resort handler.

    Raises:
        ValueError: ``name`` is not ``rdzv`` or under it (a programming error in rdzv).
    """
    if name != _TOP and not name.startswith(_TOP + "."):
        raise ValueError(
            f"get_logger({name!r}): rdzv's loggers live under {_TOP!r}; name one"
            f" {_TOP!r} or {_TOP + '.<part>'!r} (the caller in rdzv is wrong)"
        )
    logger = _loggers.setdefault(name, Logger(name))
    if _logging_module() is not None:
        logger.real()  # made now, at import, not in a node's first join
    return logger


def emit(logger: Logger | logging.Logger, event: str, level: int = DEBUG, **fields: Any) -> None:
    """Log ``event`` on ``logger`` as a structured record (cheap when nobody listens)."""
    real = logger.real() if isinstance(logger, Logger) else logger
    if real is not None and real.isEnabledFor(level):
        payload = {"event": event, **fields}
        message = fields.get("message")
        if isinstance(message, str):
            real.log(level, "%s: %s", event, message, extra={EVENT_ATTR: payload})
        else:
            shown = " ".join(f"{name}={value!r}" for name, value in fields.items())
            real.log(level, "%s %s", event, shown, extra={EVENT_ATTR: payload})


def __getattr__(name: str) -> Any:
    # EventCollector subclasses logging.Handler: defined (and logging imported) on first use.
    if name == "EventCollector":
        from rdzv._event_collector import EventCollector

        return EventCollector
    raise AttributeError(f"module 'rdzv.events' has no attribute {name!r}")


# An application that imported logging before rdzv finds the NullHandler in place at once.
if (_already := _logging_module()) is not None:
    _add_null_handler(_already)

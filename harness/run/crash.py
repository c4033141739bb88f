"""A harness failure in one line: its cause, whose fault it is, and where its traceback went.

A run that raises (the proxy did not answer, Ray refused an actor, a bug) is reported as
one line: never a traceback of forty lines in the console, JUnit or HTML report. The whole
traceback is written to a file (under ``$TMPDIR``, named after the scenario) that the line
names. Three kinds of cause are told apart:

* a :class:`~harness.errors.HarnessError` (the world, the proxy, Ray): ``the harness could
  not run the scenario: <its message>``;
* the scenario's own backend (``module:factory``) raised in the harness:
  ``the backend <name> failed in the harness (your code): ...``
  (:class:`~harness.errors.BackendError`);
* anything else is a bug: ``internal error (a bug in the harness: please report it with the
  traceback): <Type>: <message>`` (:class:`~harness.errors.InternalError`).
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
import traceback
from pathlib import Path

from harness.errors import BackendError, HarnessError, InternalError

__all__ = ["failure_line", "kind_of"]

#: A message longer than this is cut (its whole text is in the traceback file).
MAX_CAUSE = 300


def kind_of(exc: BaseException, backend: str) -> type[HarnessError]:
    """Whose fault ``exc`` is: :class:`BackendError` when a frame of ``backend``'s module
    (``module:factory``) raised it, the exception's own class when it is a
    :class:`HarnessError`, else :class:`InternalError` (a bug)."""
    if isinstance(exc, BackendError) or _raised_in_backend(exc, backend):
        return BackendError
    if isinstance(exc, HarnessError):
        return type(exc)
    return InternalError


def _raised_in_backend(exc: BaseException, backend: str) -> bool:
    module, colon, _ = backend.partition(":")
    if not colon:
        return False
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return False
    origin = spec.origin if spec is not None else None
    if not origin:
        return False
    home = os.path.dirname(origin) if origin.endswith("__init__.py") else origin
    frames = traceback.extract_tb(exc.__traceback__)
    return bool(frames) and frames[-1].filename.startswith(home)


def failure_line(exc: BaseException, scenario: str, backend: str) -> str:
    """One line for the report: the cause and the file its whole traceback was written to."""
    kind = kind_of(exc, backend)
    cause = " ".join(str(exc).split()) or "(no message)"
    if len(cause) > MAX_CAUSE:
        cause = cause[: MAX_CAUSE - 3] + "..."
    where = _write_traceback(exc, scenario)
    if kind is BackendError:
        head = f"the backend {backend} failed in the harness (your code): {type(exc).__name__}:"
    elif kind is InternalError:
        head = (
            "internal error (a bug in the harness: please report it with the traceback):"
            f" {type(exc).__name__}:"
        )
    else:
        head = "the harness could not run the scenario:"
    return f"{head} {cause} (traceback: {where})"


def _write_traceback(exc: BaseException, scenario: str) -> str:
    text = "".join(traceback.format_exception(exc))
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in scenario)[:60]
    try:
        fd, name = tempfile.mkstemp(prefix=f"harness-{safe}-", suffix=".traceback.txt")
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text)
    except OSError as err:
        return f"not written: {err}"
    return str(Path(name))

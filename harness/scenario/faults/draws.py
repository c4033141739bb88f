"""Hypothesis building blocks the fault kinds draw themselves with.

Imported only inside :meth:`~harness.scenario.faults.base.Fault.draw` methods, never at the
top of a kind's module: loading scenarios does not import hypothesis. Every strategy draws
values a ``[[fault]]`` table holds as written (seconds with one decimal, node lists sorted).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from hypothesis import strategies as st

from harness.scenario.faults.fuzzing import Outline

__all__ = ["Table", "built", "links", "subset", "tenths", "trigger", "window", "windowed"]

#: A ``[[fault]]`` table as a plain dict (the TOML form).
Table = dict[str, Any]


def built(make: Callable[[st.DrawFn], Table]) -> st.SearchStrategy[Table]:
    """The strategy whose draws are ``make(draw)`` (a one-off ``@st.composite``)."""
    return st.composite(make)()


def tenths(low: float, high: float) -> st.SearchStrategy[float]:
    """Seconds with one decimal in ``[low, high]`` (readable in a written scenario)."""
    return st.integers(round(low * 10), max(round(low * 10), round(high * 10))).map(
        lambda n: n / 10
    )


def subset(
    pool: Sequence[int], min_size: int = 1, max_size: int | None = None
) -> st.SearchStrategy[list[int]]:
    """Sorted lists of distinct nodes of ``pool`` (``pool`` must not be empty)."""
    return st.lists(
        st.sampled_from(list(pool)), min_size=min_size, max_size=max_size, unique=True
    ).map(sorted)


def links(outline: Outline) -> st.SearchStrategy[list[int] | str]:
    """The links of some nodes that start: ``"others"`` or some workers (never node 0, which
    has no link; ``outline.workers`` must not be empty)."""
    return st.one_of(st.just("others"), subset(outline.workers))


def trigger(outline: Outline) -> st.SearchStrategy[Table]:
    """When a fault acts: ``at`` up to the join timeout, or ``after`` 0-0.5 s past a node
    that starts' ``started``, ``connected`` or ``joined``."""
    at = st.fixed_dictionaries({"at": tenths(0, outline.join)})
    on = st.fixed_dictionaries(
        {
            "on": st.sampled_from(["started", "connected", "joined"]),
            "on_node": st.sampled_from(outline.present),
            "after": tenths(0, 0.5),
        }
    )
    return st.one_of(at, on)


def window(outline: Outline) -> st.SearchStrategy[Table]:
    """When a lasting fault holds: from start-up to the end (no keys), or for 0.2 s up to
    the join timeout from a :func:`trigger`."""
    timed = st.tuples(tenths(0.2, outline.join), trigger(outline)).map(
        lambda found: {"duration": found[0], **found[1]}
    )
    return st.one_of(st.just({}), timed)


def windowed(outline: Outline, kind: str, keys: dict[str, Any]) -> st.SearchStrategy[Table]:
    """Tables of ``kind`` with ``keys`` (each a strategy) in place for a :func:`window`."""
    table = st.fixed_dictionaries({"kind": st.just(kind), **keys})
    return st.tuples(table, window(outline)).map(lambda found: {**found[0], **found[1]})

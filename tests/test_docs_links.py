"""The README and docs/ link only to files inside the repository, and the field-failure
catalogue (docs/field-failures.md) lists every scenario file under the entry it names."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
CATALOGUE = REPO / "docs" / "field-failures.md"
SCENARIOS = sorted((REPO / "scenarios").rglob("*.toml"))

# [text](target) and [text](target "title"); images too.
_LINK = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_ANCHOR = re.compile(r'<a id="([^"]+)"></a>')


def _local_targets(doc: Path) -> list[str]:
    targets = _LINK.findall(doc.read_text(encoding="utf-8"))
    return [t for t in targets if not re.match(r"[a-z][a-z0-9+.-]*:", t)]  # no http:, mailto:


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(REPO).as_posix())
def test_relative_links_resolve_to_files_inside_the_repository(doc: Path) -> None:
    broken = []
    for target in _local_targets(doc):
        path = target.partition("#")[0]
        if not path:
            continue  # an anchor in the same page
        resolved = (doc.parent / path).resolve()
        if not resolved.is_relative_to(REPO) or not resolved.exists():
            broken.append(target)
    assert broken == [], f"{doc.relative_to(REPO)} links outside the repo or to nothing"
    assert "../shared/" not in doc.read_text(encoding="utf-8")


def test_catalogue_anchors_named_by_its_links_exist() -> None:
    text = CATALOGUE.read_text(encoding="utf-8")
    anchors = set(_ANCHOR.findall(text))
    wanted = {t[1:] for t in _local_targets(CATALOGUE) if t.startswith("#")}
    assert wanted - anchors == set()


def _sections(text: str) -> dict[str, str]:
    """Anchor id -> the text up to the next anchor."""
    parts = _ANCHOR.split(text)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts), 2)}


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda p: p.relative_to(REPO).as_posix())
def test_catalogue_links_each_scenario_file_under_its_field_failure(scenario: Path) -> None:
    with scenario.open("rb") as file:
        entry = tomllib.load(file).get("field_failure")
    sections = _sections(CATALOGUE.read_text(encoding="utf-8"))
    link = f"](../{scenario.relative_to(REPO).as_posix()})"
    where = "other-scenarios" if entry is None else entry.lower()
    assert where in sections, f"docs/field-failures.md has no entry {entry}"
    assert link in sections[where], f"{link[3:-1]} is not listed under {where}"

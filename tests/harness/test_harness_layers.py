"""The harness's layers, read from its source: who may import whom, and no cycles.

Every module of ``harness/`` is parsed with :mod:`ast`; every import of a harness module
(at the top, inside a function, or under ``TYPE_CHECKING``) is an edge from the importing
unit -- a subpackage (``harness.world``) or a top-level module (``harness.errors``) -- to
the imported one. The rules are those of docs/architecture.md and the subpackages'
docstrings.
"""

from __future__ import annotations

import ast
import graphlib
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HARNESS = ROOT / "harness"

#: unit -> the units it may import (itself always).
ALLOWED: Mapping[str, frozenset[str]] = {
    "harness": frozenset({"harness.errors", "harness.proxy"}),
    "harness.errors": frozenset(),
    "harness.proxy": frozenset({"harness.errors"}),
    "harness.world": frozenset({"harness.errors", "harness.proxy"}),
    "harness.scenario": frozenset({"harness.errors", "harness.world"}),
    "harness.run": frozenset(
        {"harness.errors", "harness.proxy", "harness.world", "harness.scenario"}
    ),
    "harness.report": frozenset({"harness.errors", "harness.scenario", "harness.run"}),
    "harness.fuzz": frozenset(
        {"harness.errors", "harness.scenario", "harness.run", "harness.report"}
    ),
    "harness.logs": frozenset({"harness.errors", "harness.scenario", "harness.world"}),
    "harness.cli": frozenset(
        {
            "harness.logs",
            "harness.errors",
            "harness.proxy",
            "harness.scenario",
            "harness.run",
            "harness.report",
            "harness.fuzz",
        }
    ),
    "harness.pytest_plugin": frozenset(
        {
            "harness._launch",
            "harness.errors",
            "harness.proxy",
            "harness.world",
            "harness.scenario",
            "harness.run",
            "harness.report",
        }
    ),
    "harness._launch": frozenset({"harness.cli"}),
    "harness.__main__": frozenset({"harness._launch"}),
}

#: Where a unit may reach into another only through some of its modules.
ONLY_THROUGH: Mapping[tuple[str, str], frozenset[str]] = {
    # fault kinds act through the World protocol, never a world's implementation
    ("harness.scenario", "harness.world"): frozenset({"harness.world.base"}),
    # the runner knows no fault kind by name: only the base class and the records
    ("harness.run", "harness.scenario"): frozenset(
        {
            "harness.scenario.model",
            "harness.scenario.format",
            "harness.scenario.faults.base",
            "harness.scenario.faults.record",
        }
    ),
    # reports render reports: nothing of how a run is carried out
    ("harness.report", "harness.run"): frozenset({"harness.run.model"}),
    # from-log validates what it writes, and nothing more of the scenario layer
    ("harness.logs", "harness.scenario"): frozenset({"harness.scenario.load"}),
    # from-log expects a replay's workers to end as the node classes a worker's failure
    ("harness.logs", "harness.world"): frozenset({"harness.world.process.jobs.spec"}),
    # the fuzzer runs scenarios through the suite, reads their reports, and asks which
    # world can do what (to draw only the faults a world can carry out)
    ("harness.fuzz", "harness.run"): frozenset(
        {"harness.run.suite", "harness.run.model", "harness.run.worlds"}
    ),
    # the oracle names ranks as reports (and rdzv) do
    ("harness.fuzz", "harness.report"): frozenset({"harness.report.fold"}),
}

_SUBPACKAGES = frozenset(
    u for u in ALLOWED if "." in u and HARNESS.joinpath(*u.split(".")[1:]).is_dir()
)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def unit_of(module: str) -> str:
    """The subpackage a module belongs to, else the module itself."""
    parts = module.split(".")
    if len(parts) >= 2 and ".".join(parts[:2]) in _SUBPACKAGES:
        return ".".join(parts[:2])
    return module


def imported_modules(path: Path) -> set[str]:
    """Every harness module ``path`` imports, resolved (``from harness.x import y`` names
    ``harness.x.y`` when that is a module, else ``harness.x``)."""
    package = module_name(path) if path.name == "__init__.py" else module_name(path.parent)
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                source = f"{base}.{node.module}" if node.module else base
            else:
                source = node.module or ""
            found.add(source)
            found.update(f"{source}.{alias.name}" for alias in node.names)
    known = {module_name(p) for p in HARNESS.rglob("*.py")}
    return {name for name in found if name in known}


def import_graph() -> dict[str, set[str]]:
    """module -> the harness modules it imports."""
    return {
        module_name(path): imported_modules(path) - {module_name(path)}
        for path in sorted(HARNESS.rglob("*.py"))
    }


def violations(graph: Mapping[str, Iterable[str]]) -> list[str]:
    """Every import the layer rules forbid, one line each."""
    found = []
    for module, imports in sorted(graph.items()):
        unit = unit_of(module)
        for target in sorted(imports):
            other = unit_of(target)
            if other == unit or target == "harness":
                continue
            if other not in ALLOWED.get(unit, frozenset()):
                found.append(f"{module} imports {target}: {unit} may not import {other}")
                continue
            through = ONLY_THROUGH.get((unit, other))
            if through is not None and target not in through:
                found.append(
                    f"{module} imports {target}: {unit} reaches {other} only through "
                    f"{sorted(through)}"
                )
    return found


def unit_graph(graph: Mapping[str, Iterable[str]]) -> dict[str, set[str]]:
    units: dict[str, set[str]] = {}
    for module, imports in graph.items():
        unit = unit_of(module)
        units.setdefault(unit, set()).update(
            unit_of(t) for t in imports if unit_of(t) != unit and t != "harness"
        )
    return units


def test_every_module_belongs_to_a_unit_the_rules_name() -> None:
    unknown = sorted({unit_of(m) for m in import_graph()} - set(ALLOWED))
    assert unknown == [], "add these to ALLOWED (and to docs/architecture.md)"


def test_no_module_imports_a_layer_it_may_not() -> None:
    assert violations(import_graph()) == []


def test_the_subpackages_import_each_other_without_cycles() -> None:
    graphlib.TopologicalSorter(unit_graph(import_graph())).prepare()


def test_no_two_modules_import_each_other_even_indirectly() -> None:
    graphlib.TopologicalSorter(import_graph()).prepare()


def test_the_rules_catch_a_lower_layer_importing_a_higher_one() -> None:
    found = violations(
        {
            "harness.world.local": {"harness.scenario.model"},
            "harness.proxy.api": {"harness.errors"},
            "harness.report.html": {"harness.run.runner", "harness.run.model"},
        }
    )
    assert [line.partition(": ")[2] for line in found] == [
        "harness.report reaches harness.run only through ['harness.run.model']",
        "harness.world may not import harness.scenario",
    ]
    assert [line.partition(": ")[0] for line in found] == [
        "harness.report.html imports harness.run.runner",
        "harness.world.local imports harness.scenario.model",
    ]
    with pytest.raises(graphlib.CycleError):
        graphlib.TopologicalSorter(
            {"harness.a": {"harness.b"}, "harness.b": {"harness.a"}}
        ).prepare()


@pytest.mark.parametrize("unit", sorted(_SUBPACKAGES))
def test_each_subpackage_says_what_lives_there_and_what_it_may_import(unit: str) -> None:
    init = HARNESS.joinpath(*unit.split(".")[1:], "__init__.py")
    doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
    assert doc is not None, f"{unit}/__init__.py has no docstring"
    assert "Imports:" in doc or "may import" in doc, doc


def test_rdzv_imports_nothing_of_the_harness() -> None:
    offenders = []
    for path in sorted((ROOT / "rdzv").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.append(node.module)
            if any(n == "harness" or n.startswith("harness.") for n in names):
                offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []


#: The rooms of harness.world -> the rooms each may import (itself always). ``top`` is the
#: protocol and what every world shares (base, specs, incarnations...): it imports no room.
WORLD_ROOMS: Mapping[str, frozenset[str]] = {
    "top": frozenset(),
    "process": frozenset({"top"}),
    "proxied": frozenset({"top"}),
    "local": frozenset({"top", "process", "proxied"}),
    "packed": frozenset({"top", "process", "proxied", "local"}),
    "netns": frozenset({"top", "process", "proxied"}),
    "ray": frozenset({"top", "process", "proxied"}),
}


def world_room(module: str) -> str | None:
    """The room of harness.world a module is in (None: not in harness.world)."""
    parts = module.split(".")
    if parts[:2] != ["harness", "world"]:
        return None
    if len(parts) > 2 and HARNESS.joinpath("world", parts[2]).is_dir():
        return parts[2]
    return "top"


def world_violations(graph: Mapping[str, Iterable[str]]) -> list[str]:
    """Every import between the world's rooms that :data:`WORLD_ROOMS` forbids."""
    found = []
    for module, imports in sorted(graph.items()):
        room = world_room(module)
        if room is None:
            continue
        for target in sorted(imports):
            other = world_room(target)
            if other in (None, room) or target == "harness.world":
                continue
            if other not in WORLD_ROOMS.get(room, frozenset()):
                found.append(f"{module} imports {target}: world/{room} may not import {other}")
    return found


def test_every_room_of_the_world_is_named_in_the_rules() -> None:
    rooms = {world_room(m) for m in import_graph()} - {None}
    assert sorted(rooms - set(WORLD_ROOMS)) == [], "add them to WORLD_ROOMS"


def test_the_world_rooms_import_only_what_they_may() -> None:
    assert world_violations(import_graph()) == []


def test_the_world_rules_catch_the_protocol_importing_a_room() -> None:
    found = world_violations(
        {
            "harness.world.base": {"harness.world.proxied.store_faults"},
            "harness.world.ray.world": {"harness.world.packed.world"},
            "harness.world.local.world": {"harness.world.process.cluster"},
        }
    )
    assert found == [
        (
            "harness.world.base imports harness.world.proxied.store_faults: "
            "world/top may not import proxied"
        ),
        (
            "harness.world.ray.world imports harness.world.packed.world: "
            "world/ray may not import packed"
        ),
    ]


def test_the_world_protocol_drags_in_no_interposer_or_node_machinery() -> None:
    graph = import_graph()
    seen, todo = set(), ["harness.world.base"]
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(graph.get(module, ()))
    rooms = {world_room(m) for m in seen} - {None}
    assert rooms == {"top"}, sorted(m for m in seen if world_room(m) not in (None, "top"))

"""The package layout keeps its layers: read from every module's imports (ast), never run.

Layers, lowest first: ``rdzv.errors`` / ``rdzv.events`` / ``rdzv.endpoint``, then
``rdzv.store`` (inside it: ``wire/``, then ``state/``, then ``base``, then ``server/`` and
``client/``, which never import each other), then ``rdzv.rendezvous`` (which uses the
store's public modules only), then the top-level facade (``rdzv/__init__``, the alias
modules, ``__main__``). A module may import its own layer and the ones below.
"""

from __future__ import annotations

import ast
import importlib
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import rdzv

ROOT = Path(rdzv.__file__).resolve().parent
FOUNDATION = {"rdzv.errors", "rdzv.events", "rdzv._event_collector", "rdzv.endpoint"}
#: The store's subpackages, lowest first (server and client share a layer).
STORE_LAYERS = {
    "rdzv.store.wire": 1,
    "rdzv.store.state": 2,
    "rdzv.store.server": 4,
    "rdzv.store.client": 4,
}
#: Sans-IO beyond wire/ and state/ (which are so as a whole).
SANS_IO_MORE = [
    "rdzv.store.server._droplog",
    "rdzv.store.client._causes",
    "rdzv.store.client._retry",
    "rdzv.rendezvous._round_failures",
    "rdzv.rendezvous._round_rules",
    "rdzv.rendezvous._config_values",
    "rdzv.rendezvous._static_config",
]
IO_MODULES = {"socket", "asyncio", "time", "random", "selectors", "select", "ssl"}
#: The paths torch users know, kept as aliases of the modules that hold the code.
ALIASES = {
    "rdzv.api": "rdzv.rendezvous.api",
    "rdzv.registry": "rdzv.rendezvous.registry",
    "rdzv.static": "rdzv.rendezvous.static",
    "rdzv.client": "rdzv.store.client",
    "rdzv.server": "rdzv.store.server",
}


@dataclass(frozen=True)
class Import:
    """One import statement's target, and how it runs."""

    module: str  # the imported module (a submodule when ``from pkg import submodule``)
    at_import_time: bool  # module level and not under ``if TYPE_CHECKING``
    optional: bool  # inside a ``try`` that catches ImportError


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    path = ROOT.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _catches_import_error(node: ast.Try) -> bool:
    names = {"ImportError", "ModuleNotFoundError"}
    for handler in node.handlers:
        caught = handler.type
        elts = caught.elts if isinstance(caught, ast.Tuple) else [caught]
        if any(isinstance(e, ast.Name) and e.id in names for e in elts):
            return True
    return False


def _imports(name: str) -> list[Import]:
    path = ROOT.parent.joinpath(*name.split("."))
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[Import] = []

    def visit(node: ast.AST, top: bool, optional: bool) -> None:
        if isinstance(node, ast.Import):
            found.extend(Import(alias.name, top, optional) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.append(Import(sub if _is_module(sub) else base, top, optional))
        elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                visit(child, False, optional)
            for child in node.orelse:
                visit(child, top, optional)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for child in ast.iter_child_nodes(node):
                visit(child, False, optional)
        elif isinstance(node, ast.Try):
            for child in node.body:
                visit(child, top, optional or _catches_import_error(node))
            for child in [*node.handlers, *node.orelse, *node.finalbody]:
                visit(child, top, optional)
        else:
            for child in ast.iter_child_nodes(node):
                visit(child, top, optional)

    visit(ast.parse(path.read_text(encoding="utf-8")), True, False)
    return found


MODULES = sorted(_module_name(path) for path in ROOT.rglob("*.py"))


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _layer(module: str) -> int:
    if module in FOUNDATION:
        return 0
    for package, layer in STORE_LAYERS.items():
        if _within(module, package):
            return layer
    if _within(module, "rdzv.store"):
        return 3  # the package and base: the API every store has
    if _within(module, "rdzv.rendezvous"):
        return 5
    return 6


SANS_IO = [m for m in MODULES if _layer(m) in (1, 2)] + SANS_IO_MORE


def test_the_tree_has_the_store_and_the_rendezvous_subpackages() -> None:
    assert {
        "rdzv.store",
        "rdzv.rendezvous",
        "rdzv.store.wire._wire",
        "rdzv.rendezvous._join",
    } <= set(MODULES)


def test_the_store_is_cut_into_wire_state_server_and_client_around_base() -> None:
    flat = {m for m in MODULES if m.count(".") == 2 and _within(m, "rdzv.store")}
    assert flat == {*STORE_LAYERS, "rdzv.store.base"}
    for package in STORE_LAYERS:
        assert len([m for m in MODULES if _within(m, package)]) > 2, package


@pytest.mark.parametrize("module", [m for m in MODULES if _within(m, "rdzv.store")])
def test_the_store_never_imports_the_rendezvous(module: str) -> None:
    rendezvous = [i.module for i in _imports(module) if _within(i.module, "rdzv.rendezvous")]
    assert rendezvous == [], f"{module} imports {rendezvous}"


@pytest.mark.parametrize("module", [m for m in MODULES if _within(m, "rdzv.store.server")])
def test_the_store_server_never_imports_the_client(module: str) -> None:
    client = [i.module for i in _imports(module) if _within(i.module, "rdzv.store.client")]
    assert client == [], f"{module} imports {client}"


@pytest.mark.parametrize("module", [m for m in MODULES if _within(m, "rdzv.store.client")])
def test_the_store_client_imports_the_server_only_where_a_master_starts_one(module: str) -> None:
    # A master TCPStore hosts a StoreServer: the one import of the server is inside
    # TCPStore.__init__ (and for type checkers); a client that does not host never loads it.
    server = [
        i.module
        for i in _imports(module)
        if _within(i.module, "rdzv.store.server") and i.at_import_time
    ]
    assert server == [], f"{module} imports {server} at import time"


@pytest.mark.parametrize("module", SANS_IO)
def test_the_sans_io_modules_import_no_socket_asyncio_time_or_random(module: str) -> None:
    io = [i.module for i in _imports(module) if i.module.partition(".")[0] in IO_MODULES]
    assert io == [], f"{module} imports {io}"


#: The torchrun plugin: the one module that imports torch (only torchrun loads it).
TORCHRUN_PLUGIN = "rdzv.torchrun"


@pytest.mark.parametrize("module", MODULES)
def test_rdzv_imports_only_the_standard_library_and_itself(module: str) -> None:
    # An optional import is allowed where an ImportError falls back.
    allowed = sys.stdlib_module_names | {"rdzv", "__future__"}
    if module == TORCHRUN_PLUGIN:
        allowed = allowed | {"torch"}
    foreign = [
        i.module
        for i in _imports(module)
        if not i.optional and i.module.partition(".")[0] not in allowed
    ]
    assert foreign == [], f"{module} imports {foreign}"


@pytest.mark.parametrize("module", [m for m in MODULES if m != TORCHRUN_PLUGIN])
def test_no_module_but_torchruns_own_imports_the_torchrun_plugin(module: str) -> None:
    plugin = [i.module for i in _imports(module) if i.module == TORCHRUN_PLUGIN]
    assert plugin == [], f"{module} imports {plugin}: only torchrun may load it"


@pytest.mark.parametrize("module", MODULES)
def test_each_layer_imports_only_itself_and_the_layers_below(module: str) -> None:
    higher = [i.module for i in _imports(module) if i.module.startswith("rdzv")]
    higher = [m for m in higher if _layer(m) > _layer(module)]
    assert higher == [], f"{module} (layer {_layer(module)}) imports {higher}"


def test_no_module_imports_itself_back_at_import_time() -> None:
    graph = {
        m: {i.module for i in _imports(m) if i.at_import_time and i.module in MODULES}
        for m in MODULES
    }
    done: set[str] = set()

    def walk(module: str, path: list[str]) -> None:
        if module in path:
            cycle = " -> ".join([*path[path.index(module) :], module])
            pytest.fail(f"import cycle: {cycle}")
        if module in done:
            return
        for target in sorted(graph[module]):
            walk(target, [*path, module])
        done.add(module)

    for module in MODULES:
        walk(module, [])


RENDEZVOUS = [m for m in MODULES if _within(m, "rdzv.rendezvous")]
#: What the rendezvous may ask of a store by name (a store of another kind, torch's or a
#: user's, may lack them): rdzv's TCPStore has each, torch's Store ABC not all.
OPTIONAL_STORE_METHODS = {"add_then_get", "add_then_set", "clone", "close", "compare_sets", "port"}
_STORE_LIKE = re.compile(r"store|server", re.IGNORECASE)


def _tree(module: str) -> ast.Module:
    path = ROOT.parent.joinpath(*module.split("."))
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    return ast.parse(path.read_text(encoding="utf-8"))


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _last_name(node: ast.expr) -> str:
    """``store`` of ``store``, ``self.store``, ``hosted_server(store)``: what a value is
    called where it is used."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Call):
        return _last_name(node.func)
    return ""


@pytest.mark.parametrize("module", RENDEZVOUS)
def test_the_rendezvous_imports_no_private_name_of_the_store(module: str) -> None:
    private = []
    for node in ast.walk(_tree(module)):
        if isinstance(node, ast.ImportFrom) and _within(node.module or "", "rdzv.store"):
            names = [*(node.module or "").split("."), *(a.name for a in node.names)]
        elif isinstance(node, ast.Import):
            names = [
                part
                for a in node.names
                if _within(a.name, "rdzv.store")
                for part in a.name.split(".")
            ]
        else:
            continue
        private += [ast.unparse(node) for name in names if _private(name)]
    assert private == [], f"{module}: {private} (the store's API is its public modules)"


@pytest.mark.parametrize("module", RENDEZVOUS)
def test_the_rendezvous_uses_no_private_attribute_of_a_store_or_its_server(module: str) -> None:
    found = []
    for node in ast.walk(_tree(module)):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            if _STORE_LIKE.search(_last_name(node.value)):
                found.append(ast.unparse(node))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in {"getattr", "hasattr", "setattr"}
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            name = node.args[1].value
            store_like = _STORE_LIKE.search(_last_name(node.args[0]))
            if _private(name) or (store_like and name not in OPTIONAL_STORE_METHODS):
                found.append(ast.unparse(node))
    assert found == [], f"{module}: {found} (use the store's public API)"


@pytest.mark.parametrize(("alias", "target"), sorted(ALIASES.items()))
def test_the_torch_shaped_import_paths_reach_the_same_objects(alias: str, target: str) -> None:
    old, new = importlib.import_module(alias), importlib.import_module(target)
    assert sorted(old.__all__) == sorted(new.__all__)
    for name in new.__all__:
        assert getattr(old, name) is getattr(new, name), name


def test_the_old_store_module_names_are_importable_from_the_store_package() -> None:
    from rdzv import store
    from rdzv.store import base

    assert (store.Store, store.HashStore, store.PrefixStore) == (
        base.Store,
        base.HashStore,
        base.PrefixStore,
    )


def test_every_public_name_of_rdzv_resolves() -> None:
    for name in rdzv.__all__:
        assert getattr(rdzv, name) is not None, name

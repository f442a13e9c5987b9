"""The adapters' layout rules that import-linter's contracts do not state (docs/architecture.md).

- No import circle between modules of different packages (any import, annotations'
  too), and none at run time inside a package of more than two modules: a circle is a
  missing module or an arrow the wrong way. An import made only for annotations
  (``if TYPE_CHECKING:``) inside one package, as a session naming its host's type, is
  no circle at run time and is allowed there.
- (No module over 600 lines: ``tests/test_module_sizes.py``.)
- The drawing in docs/architecture.md is the one the contracts give now.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import ModuleType

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]
ADAPTERS = "codexcore.adapters"


def layout_script() -> ModuleType:
    path = ROOT / "docs" / "hooks" / "adapters_layout.py"
    spec = importlib.util.spec_from_file_location("adapters_layout", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def package_of(module: str, packages: set[str]) -> str:
    """The package a module is a file of (a package's ``__init__`` is its own)."""
    return module if module in packages else module.rpartition(".")[0]


def circles(edges: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(edges.get(target, ())))))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def graph_edges(graph: grimp.ImportGraph, prefix: str) -> dict[str, set[str]]:
    modules = {m for m in graph.modules if m == prefix or m.startswith(prefix + ".")}
    return {
        m: {t for t in graph.find_modules_directly_imported_by(m) if t in modules} for m in modules
    }


def offending_circles(
    every_import: Mapping[str, set[str]], run_time: Mapping[str, set[str]], packages: set[str]
) -> list[str]:
    """Rule 1's breaches, each named with its modules."""
    problems = []
    for circle in circles(every_import):
        spanned = sorted({package_of(m, packages) for m in circle})
        if len(spanned) > 1:
            problems.append(f"across packages {spanned}: {circle}")
    for circle in circles(run_time):
        spanned = sorted({package_of(m, packages) for m in circle})
        if len(spanned) > 1:
            continue  # named above
        package = spanned[0]
        size = sum(1 for m in run_time if m != package and package_of(m, packages) == package)
        if size > 2:
            problems.append(f"inside {package} ({size} modules), at run time: {circle}")
    return problems


def test_no_import_circle_between_packages_nor_inside_one() -> None:
    every_import = graph_edges(grimp.build_graph("codexcore"), ADAPTERS)
    run_time = graph_edges(
        grimp.build_graph("codexcore", exclude_type_checking_imports=True), ADAPTERS
    )
    packages = {
        m
        for m in every_import
        if (ROOT / "codexcore" / Path(*m.split(".")[1:]) / "__init__.py").exists()
    }
    assert "codexcore.adapters.host" in packages
    assert offending_circles(every_import, run_time, packages) == []


def test_the_circle_check_names_what_it_finds() -> None:
    """The check itself, on a made-up graph: a host importing a dialect that imports it
    back, and three modules of one package in a ring."""
    packages = {"a", "a.host", "a.native", "a.ring"}
    edges = {
        "a.host._host": {"a.native._native"},
        "a.native._native": {"a.host._host"},
        "a.ring._one": {"a.ring._two"},
        "a.ring._two": {"a.ring._three"},
        "a.ring._three": {"a.ring._one"},
        "a.pair._one": {"a.pair._two"},
        "a.pair._two": {"a.pair._one"},
    }
    assert offending_circles(edges, edges, packages | {"a.pair"}) == [
        "across packages ['a.host', 'a.native']: ['a.host._host', 'a.native._native']",
        "inside a.ring (3 modules), at run time: ['a.ring._one', 'a.ring._three', 'a.ring._two']",
    ]


def test_the_drawing_in_the_architecture_page_is_the_contracts_now() -> None:
    script = layout_script()
    page = (ROOT / "docs" / "architecture.md").read_text()
    assert script.page_with(script.drawing(), page) == page, (
        "docs/architecture.md's drawing is stale: run python docs/hooks/adapters_layout.py"
    )


def test_the_drawing_follows_a_changed_contract() -> None:
    """A layer added to the contract is a row of the drawing (the page is not drawn by hand)."""
    script = layout_script()
    found = script.contracts()
    layers = next(c for c in found if c["type"] == "layers" and c.get("containers"))
    layers["layers"].insert(1, "websocket")
    prefix, titles = layers["name"].split(": ", 1)
    layers["name"] = f"{prefix}: " + " > ".join(
        [*titles.split(" > ")[:1], "websocket dialect", *titles.split(" > ")[1:]]
    )
    drawn = script.drawing(found)
    assert "websocket dialect\n" in drawn
    assert "│ websocket │" in drawn
    assert drawn != script.drawing()


@pytest.mark.parametrize(
    ("module", "name"),
    [
        ("codexcore.adapters", "SessionHost"),
        ("codexcore.adapters", "HostConfig"),
        ("codexcore.adapters.jsonrpc", "RpcOptions"),
        ("codexcore.adapters.threads", "CodexThread"),
        ("codexcore.adapters.client", "RemoteCodex"),
        ("codexcore.adapters.client", "RemoteCodexThread"),
        ("codexcore.adapters.acp", "serve_acp"),
        ("codexcore.adapters.app_server", "serve_app_server"),
        ("codexcore.adapters.stdio", "serve_stdio"),
        ("codexcore.adapters.tcp", "TcpServer"),
        ("codexcore.adapters.unix", "UnixServer"),
        ("codexcore.adapters.unix", "peer_uid"),
        ("codexcore.adapters.session_sockets", "SessionSockets"),
        ("codexcore.adapters.redis_pool", "RedisPool"),
    ],
)
def test_the_public_names_keep_their_paths(module: str, name: str) -> None:
    assert getattr(importlib.import_module(module), name).__name__ == name

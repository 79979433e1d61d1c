"""The package's shape: import circles, the bench's rooms and the size of its files.

Imports are read from the source (every ``import`` statement, also those inside functions, which
run later but still tie two modules together; ``if TYPE_CHECKING:`` blocks are left out because
they never run). Any circle among evoteam's modules fails.
"""

from __future__ import annotations

import ast
from pathlib import Path

import evoteam

PACKAGE_ROOT = Path(evoteam.__file__).resolve().parent
BENCH = "evoteam.servers.bench"

# The bench's rooms, top to bottom: a module may import its own room and the rooms below it, never
# one above. The MCP layer, the HTTP service and the command line sit on top; scheduling decides
# where and when an evaluation runs; evaluation evaluates one candidate here and records it;
# measurement runs and times it honestly; formats read the kits; models are the bench's schemas;
# confinement is what holds a worker in.
ROOMS = [
    ("top", {f"{BENCH}.server", f"{BENCH}.service", f"{BENCH}.cli", f"{BENCH}.kitview", f"{BENCH}.lazyrich"}),
    ("scheduling", {f"{BENCH}.scheduling"}),
    ("evaluation", {f"{BENCH}.evaluation"}),
    ("measurement", {f"{BENCH}.measurement"}),
    ("formats", {f"{BENCH}.formats"}),
    ("models", {f"{BENCH}.models"}),
    ("confinement", {f"{BENCH}.confinement"}),
]

MAX_LINES = 500
# Files over MAX_LINES allowed while someone splits them (empty: every bench file is split). The
# test fails on an entry that is no longer needed.
OVERSIZE_BEING_SPLIT: set[str] = set()


def module_name(path: Path, root: Path, package: str) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([package, *parts])


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST):
    """Every import statement in ``tree``, at any depth, except under ``if TYPE_CHECKING:``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """Module -> the package's modules it imports, read from the files under ``root``."""
    files = {module_name(p, root, package): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        is_package = path.name == "__init__.py"
        edges: set[str] = set()
        for node in _imports(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:  # relative: from the module's package, up level - 1
                    anchor = name.split(".") if is_package else name.split(".")[:-1]
                    anchor = anchor[:len(anchor) - (node.level - 1)]
                    base = ".".join(anchor + ([base] if base else []))
                # `from pkg import mod` imports the module pkg.mod; `from mod import name` the module
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names]
            for target in targets:
                # `import a.b.c` binds through the deepest module of the package that exists
                while target and target not in files:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    edges.add(target)
        graph[name] = edges
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in graph:
                    continue
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
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


def room_of(module: str) -> int | None:
    for rank, (_, prefixes) in enumerate(ROOMS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return rank
    return None


# ---------------------------------------------------------------- the checker checks


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_the_circle_finder_sees_imports_inside_functions_and_relative_ones(tmp_path):
    _write(tmp_path, {
        "__init__.py": "", "sub/__init__.py": "",
        "a.py": "def f():\n    from pkg import b\n",
        "b.py": "from .sub import c\n",
        "sub/c.py": "import pkg.a\n",
        "d.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import e\n",
        "e.py": "from pkg.d import x\n",
    })
    graph = import_graph(tmp_path, "pkg")
    assert graph["pkg.a"] == {"pkg.b"} and graph["pkg.b"] == {"pkg.sub.c"} and graph["pkg.sub.c"] == {"pkg.a"}
    assert circles(graph) == [["pkg.a", "pkg.b", "pkg.sub.c"]]  # d -> e under TYPE_CHECKING is no circle


# ---------------------------------------------------------------- evoteam


def test_no_import_circle_anywhere():
    found = circles(import_graph(PACKAGE_ROOT, "evoteam"))
    assert not found, "import circles (imports must go one way, from higher rooms to lower ones): " + \
        "; ".join(" <-> ".join(c) for c in found)


def test_bench_imports_only_go_down_through_its_rooms():
    graph = import_graph(PACKAGE_ROOT, "evoteam")
    homeless, upward = [], []
    for path in sorted((PACKAGE_ROOT / "servers" / "bench").rglob("*.py")):
        if path.name == "__init__.py":
            continue
        module = module_name(path, PACKAGE_ROOT, "evoteam")
        here = room_of(module)
        if here is None:
            homeless.append(module)
            continue
        for target in sorted(graph[module]):
            there = room_of(target)
            if there is not None and there < here:
                upward.append(f"{module} ({ROOMS[here][0]}) imports {target} ({ROOMS[there][0]})")
    assert not homeless, "bench modules in none of the rooms (add them to one, and to ROOMS): " + ", ".join(homeless)
    assert not upward, "bench imports that go up a room:\n" + "\n".join(upward)


def test_no_bench_file_is_over_500_lines():
    bench_root = PACKAGE_ROOT / "servers" / "bench"
    too_long, stale = [], []
    for path in sorted(bench_root.rglob("*.py")):
        rel = path.relative_to(PACKAGE_ROOT).as_posix()
        lines = len(path.read_text().splitlines())
        if lines > MAX_LINES and rel not in OVERSIZE_BEING_SPLIT:
            too_long.append(f"{rel}: {lines} lines")
    for rel in sorted(OVERSIZE_BEING_SPLIT):
        path = PACKAGE_ROOT / rel
        if not path.is_file() or len(path.read_text().splitlines()) <= MAX_LINES:
            stale.append(rel)
    assert not too_long, f"bench files over {MAX_LINES} lines (split them): " + ", ".join(too_long)
    assert not stale, "OVERSIZE_BEING_SPLIT names files that are split now; remove them: " + ", ".join(stale)


def test_no_file_of_the_package_is_far_over_500_lines():
    """Outside the bench the rule is "about 500": a file a few lines over is not split for its
    own sake, but none grows into a second concept unseen."""
    limit = MAX_LINES + MAX_LINES // 10
    too_long = [f"{p.relative_to(PACKAGE_ROOT).as_posix()}: {n} lines" for p in sorted(PACKAGE_ROOT.rglob("*.py"))
                if (n := len(p.read_text().splitlines())) > limit]
    assert not too_long, f"files over {limit} lines (split them by concept): " + ", ".join(too_long)

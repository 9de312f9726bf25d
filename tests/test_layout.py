"""The layout shows the architecture: no import cycles, impl never imports spec, every engine in its folder."""

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("spec", "impl", "proofs")


def module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules() -> dict[str, pathlib.Path]:
    return {module_name(p): p for package in PACKAGES for p in (ROOT / package).rglob("*.py")}


def imports_of(path: pathlib.Path, name: str, modules: dict) -> set[str]:
    """Every project module that ``path`` imports at run time, at any depth of the file (function-level imports too)."""
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text())
    typing_only = {  # imports under `if TYPE_CHECKING:` never run
        id(inner) for node in ast.walk(tree)
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", None)) == "TYPE_CHECKING"
        for stmt in node.body for inner in ast.walk(stmt)
    }
    found = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            candidates = [prefix] + [f"{prefix}.{alias.name}" for alias in node.names]
        else:
            continue
        for candidate in candidates:
            # the longest project module that the imported name is, or lies in
            while candidate and candidate not in modules:
                candidate = candidate.rpartition(".")[0]
            if candidate and candidate != name:
                found.add(candidate)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = project_modules()
    return {name: imports_of(path, name, modules) for name, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of the graph as a list of modules, or None (depth-first search with colours)."""
    colour = {node: 0 for node in graph}
    stack: list[str] = []

    def visit(node):
        colour[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt.startswith(node + ".") or node.startswith(nxt + "."):
                continue  # a package and its own submodules are one unit of import
            if colour.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if colour.get(nxt) == 0:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        colour[node] = 2
        return None

    for node in sorted(graph):
        if colour[node] == 0:
            found = visit(node)
            if found:
                return found
    return None


def test_the_project_has_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, " -> ".join(cycle)


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_impl_never_imports_spec_nor_proofs():
    graph = import_graph()
    leaks = {m: sorted(d for d in deps if d.split(".")[0] in ("spec", "proofs")) for m, deps in graph.items() if m.startswith("impl")}
    assert not any(leaks.values()), leaks


def test_spec_imports_no_engine():
    for path in (ROOT / "spec").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            for name in names:
                assert name.split(".")[0] not in ("hypothesis", "crosshair", "z3", "proofs", "impl"), f"{path}: imports {name}"


def test_each_engine_lives_in_its_folder():
    proofs = ROOT / "proofs"
    assert (proofs / "sandbox.py").is_file()
    for folder in ("search", "symbolic", "smt", "report", "cli"):
        assert (proofs / folder / "__init__.py").is_file(), folder
    flat = sorted(p.name for p in proofs.glob("*.py"))
    assert flat == ["__init__.py", "counterexample.py", "outcomes.py", "pytest_plugin.py", "sandbox.py", "targets.py", "views.py"], flat
    for path in proofs.rglob("*.py"):
        tree = ast.parse(path.read_text())
        assert ast.get_docstring(tree), f"{path.relative_to(ROOT)} has no module docstring"

"""The package's shape: public names resolve, imports run one way, and only `lotlib/models` knows architectures.

Levels, top to bottom: the command line; `book` (the execution engine); `chapters` (one module per notebook);
`verdicts` (claims and judging) over `summary` (what a chapter records); the papers' building blocks (`lines_of_thought`, `traveling_words`, which never
import each other); `stats`, `plots`, `models`, `storage`. Nothing imports upward, no chapter module imports
another, and no import (module level or inside a function) closes a cycle.
"""
import ast
import importlib
import pkgutil
from pathlib import Path

import pytest

import lotlib

PACKAGE = Path(lotlib.__file__).parent
BELOW_PAPERS = {"stats", "plots", "models", "storage"}
ROOMS = {  # package -> the lotlib packages (and top-level modules) it may import
    "project": set(),
    "storage": {"project"},
    "stats": set(),
    "plots": set(),
    "models": {"storage"},
    "traveling_words": BELOW_PAPERS,
    "lines_of_thought": BELOW_PAPERS,
    "summary": {"stats"},
    "verdicts": {"summary", "stats", "plots", "storage"},
    "chapters": {"lines_of_thought", "traveling_words"} | BELOW_PAPERS,
    "book": {"verdicts", "summary", "stats", "plots", "models", "storage", "project"},
}
LOCAL_IMPORTS_ALLOWED = 15  # function-local lotlib imports are kept for heavy optional parts only


def _name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path, path.relative_to(PACKAGE).parts[0].removesuffix(".py")


MODULES = {_name(path): path for path, _ in _modules()}


def _imports(path: Path) -> list[tuple[ast.AST, set[str]]]:
    """Each import statement of `path` (module level or inside a function) with the lotlib modules it names."""
    name = _name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(up + ([base] if base else []))
            targets = {base} | {f"{base}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            targets = {a.name for a in node.names}
        else:
            continue
        hits = {t for t in targets if t in MODULES and t != name}
        if hits:
            found.append((node, hits))
    return found


def _function_local(path: Path) -> int:
    tree = ast.parse(path.read_text())
    spans = [(f.lineno, f.end_lineno) for f in ast.walk(tree) if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)]
    return sum(any(a <= node.lineno <= b for a, b in spans) for node, _ in _imports(path))


def _rooms(path: Path) -> set[str]:
    return {target.split(".")[1] for _, hits in _imports(path) for target in hits if target.count(".")}


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), a package's `__init__` re-exporting
    its own children excepted."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while not component or component[-1] != v:
                component.append(stack.pop())
                on.discard(component[-1])
            if len(component) > 1:
                found.append(sorted(component))

    for v in edges:
        if v not in index:
            visit(v)
    return found


def _edges() -> dict[str, set[str]]:
    """Module -> the lotlib modules it imports; a child's import of its own package's `__init__` (the re-export)
    is left out."""
    edges = {}
    for name, path in MODULES.items():
        edges[name] = {t for _, hits in _imports(path) for t in hits
                       if not (name.startswith(t + ".") and MODULES[t].name == "__init__.py")}
    return edges


def test_public_names_resolve_after_every_submodule_is_imported():
    for info in pkgutil.walk_packages(lotlib.__path__, prefix="lotlib."):
        importlib.import_module(info.name)
    for name in lotlib.__all__:
        obj = getattr(lotlib, name)
        assert not isinstance(obj, type(lotlib)), f"lotlib.{name} is a module, not the public object"
    assert callable(lotlib.capture) and callable(lotlib.trajectories) and callable(lotlib.load_model)


@pytest.mark.parametrize("room", sorted(ROOMS))
def test_dependency_rule(room):
    problems = []
    for path, owner in _modules():
        if owner != room:
            continue
        bad = _rooms(path) - ROOMS[room] - {room}
        if bad:
            problems.append(f"{path.relative_to(PACKAGE)} imports {sorted(bad)}")
    assert not problems, "\n".join(problems)


def test_no_import_cycle():
    cycles = _cycles(_edges())
    assert not cycles, "import cycles (every import counted, function-local ones too):\n" + "\n".join(
        " -> ".join(c) for c in cycles)


def test_the_cycle_check_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_chapter_module_imports_another():
    chapters = {n for n in MODULES if n.startswith("lotlib.chapters.")}
    problems = [f"{n} imports {sorted(t for t in _edges()[n] if t in chapters)}"
                for n in sorted(chapters) if _edges()[n] & chapters]
    assert not problems, "\n".join(problems)


def test_few_function_local_imports():
    counts = {str(path.relative_to(PACKAGE)): _function_local(path) for path, _ in _modules()}
    total = sum(counts.values())
    assert total < LOCAL_IMPORTS_ALLOWED, f"{total} function-local lotlib imports: " + ", ".join(
        f"{p} {n}" for p, n in sorted(counts.items()) if n)


QUIRK_ATTRIBUTES = {"model_type", "family", "embed_scale", "LayerNorm", "RMSNorm"}
FAMILY_NAMES = {"gpt2", "llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text"}


def _architecture_questions(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in QUIRK_ATTRIBUTES:
            found.append((node.lineno, f"reads .{node.attr}"))
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance" and \
                getattr(node.args[1], "id", None) == "tuple":
            found.append((node.lineno, "unwraps an output tuple"))
        elif isinstance(node, ast.Compare):
            parts = [node.left, *node.comparators]
            if any(isinstance(p, ast.Attribute) and p.attr == "kind" for p in parts):
                found.append((node.lineno, "tests a norm's kind"))
            if any(isinstance(p, ast.Constant) and p.value in FAMILY_NAMES for p in parts):
                found.append((node.lineno, "compares with a family name"))
    return found


def test_only_models_knows_the_architecture():
    problems = [f"{path.relative_to(PACKAGE)}:{line}: {what}" for path, owner in _modules() if owner != "models"
                for line, what in _architecture_questions(ast.parse(path.read_text()))]
    assert not problems, "architecture questions outside lotlib/models:\n" + "\n".join(problems)

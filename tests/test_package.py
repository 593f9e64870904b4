"""The package's shape: public names resolve, and the layout's dependency rule holds.

`lotlib.models` knows the architectures; the two paper packages use it and never each other; `lotlib.book`
uses everything and nothing in the library uses it (only the command line does); `lotlib.storage` uses
nothing else of lotlib. Architecture questions (model types, family names, norm classes, block output
tuples) are asked in `lotlib/models/` only.
"""
import ast
import importlib
import pkgutil
from pathlib import Path

import pytest

import lotlib

PACKAGE = Path(lotlib.__file__).parent
ROOMS = {  # package -> the lotlib packages (and top-level modules) it may import
    "storage": set(),
    "models": {"storage"},
    "traveling_words": {"models", "storage", "intervals", "plots"},
    "lines_of_thought": {"models", "storage", "intervals", "plots"},
    "intervals": set(),
    "plots": set(),
}


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path, path.relative_to(PACKAGE).parts[0].removesuffix(".py")


def _imported_rooms(path: Path) -> set[str]:
    rooms = set()
    package = path.relative_to(PACKAGE.parent).with_suffix("").parts
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = list(package[:len(package) - node.level]) + (node.module.split(".") if node.module else [])
            names = [base[1]] if len(base) > 1 else [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("lotlib."):
            names = [node.module.split(".")[1]]
        elif isinstance(node, ast.Import):
            names = [a.name.split(".")[1] for a in node.names if a.name.startswith("lotlib.")]
        else:
            continue
        rooms |= set(names)
    return rooms


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
        bad = _imported_rooms(path) - ROOMS[room] - {room}
        if bad:
            problems.append(f"{path.relative_to(PACKAGE)} imports {sorted(bad)}")
    assert not problems, "\n".join(problems)


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

"""Each chapter's study in its room: claim keys written once where they are computed, figures returned (never
shown) by the library, short files, and a wheel that ships only what a reader's code or the book uses."""
import ast
import re
from pathlib import Path

import yaml

from .conftest import ROOT

PACKAGE = ROOT / "lotlib"
CHAPTERS = sorted((PACKAGE / "chapters").glob("[a-c][0-9]*.py"))
MAX_LINES = 600


def _claim_keys() -> dict[str, str]:
    """Every key the claims read (each claim's and each of its nulls'), with the claims file naming it."""
    keys = {}
    for path in sorted((ROOT / "book" / "claims").glob("*.yml")):
        for claim in yaml.safe_load(path.read_text()) or []:
            nulls = claim.get(None) or []  # YAML reads the bare word `null:` as the key None
            for key in [claim.get("key"), *(n.get("key") for n in ([nulls] if isinstance(nulls, dict) else nulls))]:
                if key:
                    keys.setdefault(key, path.name)
    return keys


def _string_constants(path: Path) -> set[str]:
    """The plain string literals of a module (an f-string's pieces are not literals of a whole key)."""
    tree = ast.parse(path.read_text())
    inside_fstrings = {id(v) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for v in node.values}
    return {node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in inside_fstrings}


def test_every_claim_key_is_written_literally_in_exactly_one_chapter_module():
    literals = {path.name: _string_constants(path) for path in CHAPTERS}
    problems = []
    for key, claims in _claim_keys().items():
        owners = [name for name, strings in literals.items() if key in strings]
        if len(owners) != 1:
            problems.append(f"{key!r} ({claims}): in {owners or 'no chapter module'}")
    assert not problems, "claim keys not literal in exactly one lotlib/chapters module:\n" + "\n".join(problems)


def test_the_key_check_sees_through_fstrings(tmp_path):
    module = tmp_path / "m.py"
    module.write_text('suffix = "_cloud"\nvalues = {f"r2_relative{suffix}": 1, "r2_log_mean": 2}\n')
    assert "r2_log_mean" in _string_constants(module)
    assert not {"r2_relative", "r2_relative_cloud"} & _string_constants(module)


def _pyplot_shows(path: Path) -> list[int]:
    return [node.lineno for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "show"
            and getattr(node.func.value, "id", None) == "plt"]


def test_library_functions_return_figures_and_never_show_them():
    shows = [f"{path.relative_to(ROOT)}:{line}" for path in sorted(PACKAGE.rglob("*.py"))
             for line in _pyplot_shows(path)]
    assert not shows, "plt.show() inside lotlib (return the figure; the notebook shows it):\n" + "\n".join(shows)


def test_no_library_file_is_over_the_limit():
    long = {str(p.relative_to(ROOT)): n for p in sorted(PACKAGE.rglob("*.py"))
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"lotlib files over {MAX_LINES} lines (split them by idea): {long}"


def _used_text() -> str:
    """Everything that uses the library as a reader or the book does: the package, the notebooks, the book's
    pages and extensions, and the Makefile (`python -m ...` entry points)."""
    files = [*PACKAGE.rglob("*.py"), *(ROOT / "notebooks").glob("*.py"), *(ROOT / "book").rglob("*.md"),
             *(ROOT / "book" / "_ext").glob("*.py"), ROOT / "Makefile", ROOT / "pyproject.toml"]
    return "\n".join(p.read_text() for p in files)


def test_the_wheel_ships_only_what_the_library_or_the_book_uses():
    """A public top-level function or class of lotlib is named somewhere besides its definition (in lotlib, a
    notebook, the book or the Makefile); one used only by tests or benchmarks lives next to them."""
    text = _used_text()
    unused = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef | ast.ClassDef) and not node.name.startswith("_") \
                    and not node.decorator_list and len(re.findall(rf"\b{node.name}\b", text)) < 2:
                unused.append(f"{path.relative_to(ROOT)}: {node.name}")
    assert not unused, "used only by tests or benchmarks (move it there):\n" + "\n".join(unused)

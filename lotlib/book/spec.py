"""What a chapter notebook is, read once: its declared parameters, whether it records a summary, and the lotlib
source files its code depends on (which join its execution key)."""

from __future__ import annotations

import ast
import re
import threading
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from .. import _EXPORTS
from .parameters import Parameter, declared_parameters

PACKAGE = Path(__file__).resolve().parents[1]  # the lotlib package folder
PARAMETERS_MARKER = re.compile(r"""^# %%.*\btags\s*=\s*\[[^\]]*["']parameters["']""")
NEEDS_LINE = re.compile(r"^#\s+needs:\s*\[([^\]]*)\]\s*$")
# Building Python AST objects is not thread-safe in CPython 3.11 and 3.12 (SystemError "AST constructor
# recursion depth mismatch"): lotlib's own parses in one process take turns. Runs sent to a cluster carry a
# resolved spec (`NotebookSpec.resolved`), so a worker's threads parse nothing for lotlib at all; the lock
# covers a caller that runs notebooks by path in threads of one process.
PARSING = threading.Lock()


@dataclass(frozen=True)
class NotebookSpec:
    """A notebook's source file, its code and its declared parameters."""

    source: Path
    code: str
    parameters: dict[str, Parameter] = field(repr=False)
    needs: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.source.stem

    @property
    def defaults(self) -> dict:
        return {name: p.default for name, p in self.parameters.items()}

    def resolved(self) -> NotebookSpec:
        """This spec with everything read from its source computed now (`records`, `dependencies`, `packages`):
        a copy sent to another process (a Dask worker) parses nothing there."""
        _ = self.records, self.dependencies, self.packages
        return self

    @cached_property
    def records(self) -> bool:
        """Whether the code calls `record` or `conclude` (then every run must record its summary)."""
        with PARSING:
            tree = ast.parse(self.code)
        return any(
            isinstance(node, ast.Name) and node.id in ("record", "conclude")
            for node in ast.walk(tree)
        )

    @cached_property
    def dependencies(self) -> list[Path]:
        """The notebook's source and the lotlib files its code imports, transitively."""
        return [self.source, *lotlib_dependencies(self.code)]

    @cached_property
    def packages(self) -> set[str]:
        """The top-level packages the code imports, itself or through the lotlib modules it imports."""
        found = top_level_imports(self.code)
        for path in self.dependencies[1:]:
            found |= top_level_imports(path.read_text())
        return found


def read_spec(source: str | Path) -> NotebookSpec:
    """Read notebook `source` once into its spec (parameters parsed, code kept).

    A Jupytext percent file is read as text, without jupytext or nbformat (whose imports take seconds: a bad
    parameter fails at once): its `parameters` cell is the lines after the marker tagged `parameters`, the
    whole file is its code (markdown cells are comments to Python), and its header may say what the chapter
    `needs` of a model (`#   needs: [readout, causal]`, names of `lotlib.models.view.LACKS`). Any other notebook format goes through
    jupytext. `lotlib.book.parameters.declared_parameters` is the one parser of a parameters cell.
    """
    source = Path(source).resolve()
    text = source.read_text()
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if PARAMETERS_MARKER.match(ln)), None)
    if start is None:  # not a percent file with a parameters cell: jupytext reads it
        import jupytext

        nb = jupytext.read(source)
        code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
        cells = [
            c.source for c in nb.cells if "parameters" in c.metadata.get("tags", [])
        ]
        cell = cells[0] if cells else ""
    else:
        end = next(
            (i for i in range(start + 1, len(lines)) if lines[i].startswith("# %%")),
            len(lines),
        )
        code, cell = text, "\n".join(lines[start + 1 : end])
    with PARSING:
        parameters = declared_parameters(cell, source.name)
    return NotebookSpec(source, code, parameters, header_needs(lines))


def header_needs(lines: list[str]) -> tuple[str, ...]:
    """What the Jupytext header (the lines between the first two `# ---`) says the chapter needs of a model:
    `#   needs: [readout, causal]` -> ("readout", "causal"); () without such a line."""
    if not lines or lines[0].strip() != "# ---":
        return ()
    end = next((i for i in range(1, len(lines)) if lines[i].strip() == "# ---"), 0)
    for line in lines[1:end]:
        found = NEEDS_LINE.match(line)
        if found:
            return tuple(n.strip() for n in found.group(1).split(",") if n.strip())
    return ()


def _imported_modules(
    code: str, module: str | None = None, is_package: bool = False
) -> set[str]:
    """Dotted names of the lotlib modules that `code` imports: `module` names the code's own module (for
    relative imports; None for a notebook). A name may be a package attribute rather than a module;
    `lotlib_dependencies` keeps those that are files. `import lotlib` brings every lazily exported module."""

    found: set[str] = set()
    with PARSING:
        tree = ast.parse(code)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "lotlib":
                    found |= {"lotlib", *(f"lotlib.{m}" for m in _EXPORTS.values())}
                elif alias.name.startswith("lotlib."):
                    found.add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                if module is None:
                    continue
                package = module.split(".") if is_package else module.split(".")[:-1]
                base = ".".join(
                    package[: len(package) - node.level + 1]
                    + ([node.module] if node.module else [])
                )
            else:
                base = node.module or ""
            if base.split(".")[0] != "lotlib":
                continue
            found.add(base)
            for alias in node.names:
                found.add(f"{base}.{alias.name}")
                if base == "lotlib" and alias.name in _EXPORTS:
                    found.add(f"lotlib.{_EXPORTS[alias.name]}")
    return found


def top_level_imports(code: str) -> set[str]:
    """The first component of every absolute import in `code` (`from a.b import c` -> "a")."""
    with PARSING:
        tree = ast.parse(code)
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module.split(".")[0])
    return names


def _module_file(name: str) -> Path | None:
    """lotlib.models.view -> .../lotlib/models/view.py (a package -> its __init__.py); None if not a file."""
    base = PACKAGE.parent.joinpath(*name.split("."))
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    return base / "__init__.py" if (base / "__init__.py").is_file() else None


def lotlib_dependencies(code: str) -> list[Path]:
    """The lotlib source files `code` depends on: the modules it imports, the packages that hold them, and
    what those import, transitively."""
    todo, seen = _imported_modules(code), {}
    while todo:
        name = todo.pop()
        path = _module_file(name)
        if name in seen or path is None:
            continue
        seen[name] = path
        parts = name.split(".")
        # a module's packages run
        todo |= {".".join(parts[:i]) for i in range(1, len(parts))}
        todo |= _imported_modules(path.read_text(), name, path.name == "__init__.py")
    return sorted(seen.values())

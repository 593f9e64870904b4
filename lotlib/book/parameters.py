"""A chapter's parameters, their declared types, and the check every value passes before a run."""

from __future__ import annotations

import ast
import types
import typing
from dataclasses import dataclass
from typing import Any, Literal

from ..models.bounds import (
    TYPES,
    Bounded,
    ParameterError,
    Pilots,
    model_shape,
)

# the weights' dtypes `load_model` takes (`loading.DTYPES`, not imported here: it imports torch)
Dtype = Literal["float32", "bfloat16", "float16"]
NAMESPACE = {"Literal": Literal, "Any": Any, "Dtype": Dtype, **TYPES}


@dataclass(frozen=True)
class Parameter:
    """One declared parameter: its default, its type (evaluated) as written, and its help comment."""

    name: str
    default: Any
    annotation: Any
    text: str
    help: str


def declared_parameters(
    code: str, where: str = "the parameters cell"
) -> dict[str, Parameter]:
    """Every assignment of `code` (a parameters cell), with its annotation and the comment on its line. An
    undeclared parameter takes its default's type; one whose default is None has no type (None). Defaults
    must be literals.

    The `parameters` cell of a chapter declares each parameter with a type annotation and a comment::

        model: str = "smollm2-135m"  # embedded name, local folder or hub id
        n_s: "int | None" = None  # cap on pseudo-sentences (None: all of Walden)
        blocks: "list[Block] | None" = None  # blocks probed (None: first, middle, last)

    An annotation may be a string (then the cell needs no import). Types: int, float (an int is accepted), str,
    bool, None, list[T], tuple, dict, unions (``int | None``), Literal[...], Any, Dtype (the weights' dtype), and
    the model-relative types of `lotlib.models.bounds` (Layer, Block, Pilots, FullBasis, HeldOutBasis, PaperPilots, Tokens).
    `check_parameters` refuses a value of the wrong type, naming the parameter, the expected type and the value given, and, when the chapter has a
    `model` parameter, checks the model-relative ones against the model's configuration: all before a kernel
    starts or a weight is read.
    """
    lines = code.splitlines()
    out = {}
    for node in ast.parse(code).body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            name, text = (
                node.target.id,
                ast.literal_eval(node.annotation)
                if isinstance(node.annotation, ast.Constant)
                else ast.unparse(node.annotation),
            )
        elif (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
        ):
            name, text = node.targets[0].id, None
        else:
            continue
        try:
            default = ast.literal_eval(node.value)
        except ValueError as err:
            raise ParameterError(
                f"{where}: the default of {name} is not a literal ({err})"
            ) from None
        try:
            annotation = None if text is None else eval(text, dict(NAMESPACE))  # noqa: S307 - the project's own cells
        except Exception as err:  # noqa: BLE001
            raise ParameterError(
                f"{where}: the type of {name}, {text!r}, is not understood ({err})"
            ) from None
        # the default's type, when nothing is declared
        if annotation is None and default is not None:
            annotation, text = type(default), type(default).__name__
        span = lines[node.lineno - 1 : node.end_lineno]  # a formatter may wrap the line
        comment = " ".join(c for line in span if (c := line.partition("#")[2].strip()))
        out[name] = Parameter(name, default, annotation, text or "", comment)
    return out


def conforms(value, annotation) -> bool:
    """Whether `value` (as parsed from YAML or given in Python) has the declared type."""
    if annotation is None or annotation is Any:
        return True
    if annotation is type(None):
        return value is None
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        return any(conforms(value, a) for a in args)
    if origin is Literal:
        return value in args
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            return False
        return not args or all(conforms(v, args[0]) for v in value)
    if origin is dict:
        return isinstance(value, dict) and (
            not args or all(conforms(v, args[1]) for v in value.values())
        )
    if isinstance(annotation, type) and issubclass(annotation, Bounded):
        return annotation.accepts(value)
    if annotation is bool:
        return isinstance(value, bool)
    if annotation is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if annotation is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if annotation in (list, tuple):
        return isinstance(value, (list, tuple))
    return isinstance(annotation, type) and isinstance(value, annotation)


def _bounded(value, annotation) -> list[tuple[type[Bounded], Any]]:
    """The (model-relative type, value) pairs inside `value` that need the model's shape."""
    if value is None or annotation is None:
        return []
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if isinstance(annotation, type) and issubclass(annotation, Bounded):
        return [(annotation, value)]
    if origin in (typing.Union, types.UnionType):
        for a in args:
            if a is not type(None) and conforms(value, a):
                return _bounded(value, a)
    if origin in (list, tuple) and args:
        return [pair for v in value for pair in _bounded(v, args[0])]
    return []


def _describe(parameter: Parameter) -> str:
    text = parameter.text
    for name, cls in TYPES.items():
        if name in text:
            text += f"; {name} is {cls.description}"
    return text


def check_parameters(declared: dict[str, Parameter], values: dict, where: str) -> None:
    """Refuse unknown names, values of the wrong type and model-relative values that do not fit the model
    (`values` are the overrides; the rest keep their defaults). Raises `ParameterError` with one clear line."""
    unknown = sorted(set(values) - set(declared))
    if unknown:
        raise ParameterError(
            f"{where}: unknown parameter(s) {', '.join(unknown)}; it takes: {', '.join(declared)}"
        )
    merged = {name: values.get(name, p.default) for name, p in declared.items()}
    for name, value in values.items():
        p = declared[name]
        if not conforms(value, p.annotation):
            raise ParameterError(
                f"{where}: parameter {name} expects {_describe(p)}; got {value!r} "
                f"({type(value).__name__})"
            )
    pending = [
        (name, kind, v)
        for name, p in declared.items()
        for kind, v in _bounded(merged[name], p.annotation)
    ]
    if pending and isinstance(merged.get("model"), str):
        shape = model_shape(merged["model"])
        for name, kind, value in pending:
            try:
                kind.check(value, shape, name, merged)
            except ParameterError as err:
                raise ParameterError(f"{where}: {err}") from None


# the parameters that count pseudo-sentences of Walden (the others of a pilot type count other corpora)
WALDEN_PILOTS = ("n_s", "n_s_paper")


def walden_demand(
    declared: dict[str, Parameter], merged: dict, d_model: int
) -> tuple[str, Any, int] | None:
    """The fewest pseudo-sentences of Walden a run needs at width `d_model`: (parameter, its value, count)
    over `WALDEN_PILOTS` declared with a pilot type. Each needs only the least its type allows (D for a full
    basis, 2 D for a held-out one): the others cap what is read, and a `PaperPilots` count larger than Walden
    takes all of it, as the paper's widest models did (`ensemble.authors_pilots`). None when the chapter
    declares none."""
    needed = []
    for name in WALDEN_PILOTS:
        if name not in declared:
            continue
        annotation = declared[name].annotation
        kinds = [
            a
            for a in (typing.get_args(annotation) or (annotation,))
            if isinstance(a, type) and issubclass(a, Pilots)
        ]
        if kinds:
            needed.append((name, merged[name], kinds[0].least(d_model)))
    return max(needed, key=lambda a: a[2], default=None)

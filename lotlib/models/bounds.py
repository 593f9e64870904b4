"""Parameters that must fit the model: layer and block indices, pilot counts, context length."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache

from .sources import context_length, load_config

NAMES = ("first", "middle", "last")
WIDTH = re.compile(r"^(\d+(?:\.\d+)?)?D$")


class ParameterError(ValueError):
    """A parameter's value does not fit its declared type or the model."""


@dataclass(frozen=True)
class Shape:
    """What a parameter check needs to know of a model: depth L, width D, context length, vocabulary."""

    name: str
    n_layers: int
    d_model: int
    max_positions: int | None
    vocab_size: int


@lru_cache(maxsize=32)
def model_shape(name: str) -> Shape:
    """The `Shape` of model `name` from its configuration alone (fast: no weights are read)."""

    config = load_config(name)
    layers = config.get("num_hidden_layers") or config.get("n_layer")
    width = config.get("hidden_size") or config.get("n_embd")
    return Shape(
        name, int(layers), int(width), context_length(config), int(config["vocab_size"])
    )


# ----------------------------------------------------------------------------------------------
# resolution with a model (the chapter's side) and the same checks before a run


def _index(value, count: int, param: str, what: str, middle: int, model: str) -> int:
    named = {"first": 0, "middle": middle, "last": count - 1}
    valid = f"{what}s 0..{count - 1}, -{count}..-1 from the end, or {'/'.join(NAMES)}"
    if isinstance(value, str):
        if value not in named:
            raise ParameterError(
                f"parameter {param} = {value!r} is not a {what}; valid: {valid}"
            )
        return named[value]
    if isinstance(value, bool) or not isinstance(value, int):
        raise ParameterError(
            f"parameter {param} = {value!r} is not a {what} index; valid: {valid}"
        )
    if not -count <= value < count:
        raise ParameterError(
            f"parameter {param} = {value} is out of range: {model} has {count} {what}s; "
            f"valid: {valid}"
        )
    return value % count


def layer_index(
    value, n_layers: int, param: str = "layer", model: str = "the model"
) -> int:
    """Index t of the states x(0..L), L = `n_layers` ("middle" = L // 2, "last" = L)."""
    return _index(value, n_layers + 1, param, "layer", n_layers // 2, model)


def block_index(
    value, n_layers: int, param: str = "block", model: str = "the model"
) -> int:
    """Index of a block 0..L-1 ("middle" = (L - 1) // 2, "last" = L - 1)."""
    return _index(value, n_layers, param, "block", (n_layers - 1) // 2, model)


def block_indices(
    values, n_layers: int, param: str = "blocks", model: str = "the model"
) -> list[int]:
    """Block indices resolved with `block_index`."""
    return [block_index(v, n_layers, param, model) for v in values]


def layer_indices(
    values, n_layers: int, param: str = "layers", model: str = "the model"
) -> list[int]:
    """Layer indices resolved with `layer_index`."""
    return [layer_index(v, n_layers, param, model) for v in values]


def pilot_count(
    value,
    d_model: int,
    param: str = "n_s",
    at_least_width: bool = False,
    model: str = "the model",
) -> int | None:
    """A count of pseudo-sentences: a positive int, or "D" / "kD" (k times the width D, rounded up). None
    stays None (all of the corpus). With `at_least_width` a number below D is refused."""
    if value is None:
        return None
    if isinstance(value, str):
        match = WIDTH.match(value.replace(" ", ""))
        if not match:
            raise ParameterError(
                f"parameter {param} = {value!r}: expected a number of pseudo-sentences or a "
                f"multiple of the width D such as 'D' or '1.5D'"
            )
        value = math.ceil(float(match.group(1) or 1) * d_model)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ParameterError(
            f"parameter {param} = {value!r}: expected a positive number of pseudo-sentences"
        )
    if at_least_width and value < d_model:
        raise ParameterError(
            f"parameter {param} = {value} is below D = {d_model}: this chapter needs at least "
            f"as many pilots as {model}'s width (a full basis); use {param} >= {d_model}, "
            f"'D', or None (all of the corpus)"
        )
    return value


def check_context(
    n_k: int,
    max_positions: int | None,
    bos: bool | None = False,
    param: str = "n_k",
    model: str = "the model",
) -> int:
    """`n_k` tokens per pseudo-sentence (plus BOS) must fit the context length of `model`; `bos=None` (as the
    tokenizer does, not known before it loads) counts a BOS."""
    if isinstance(n_k, bool) or not isinstance(n_k, int) or n_k < 2:
        raise ParameterError(
            f"parameter {param} = {n_k!r}: expected at least 2 tokens per pseudo-sentence "
            f"(a pilot and one token of context)"
        )
    counted = int(bos is not False)
    extra = (
        ""
        if not counted
        else " plus BOS"
        if bos
        else " plus a BOS if the tokenizer adds one"
    )
    if max_positions is not None and n_k + counted > max_positions:
        raise ParameterError(
            f"parameter {param} = {n_k}{extra}: {model}'s context holds {max_positions} positions; "
            f"use {param} <= {max_positions - counted}"
        )
    return n_k


def check_reinit(
    model: str, untrained: bool, reinit_from: int | None, param: str = "reinit_from"
) -> None:
    """Refuse `reinit_from` (`param`: how the caller spells it, e.g. the flag `--reinit-from`) on an untrained
    `model`: it has no trained block to keep."""
    if not untrained or reinit_from is None:
        return
    asked = (
        f"{param} {reinit_from}"
        if param.startswith("-")
        else f"{param} = {reinit_from}"
    )
    raise ParameterError(
        f"{asked} re-initialises blocks of trained weights, but untrained {model} has no trained block to "
        f"keep: drop {param}, or load the trained model"
    )


# ----------------------------------------------------------------------------------------------
# the declared types: what a value may look like, and how it is checked against a model's shape


class Bounded:
    """A parameter type whose values depend on the model: `accepts` checks the form, `check` the fit.

    A chapter declares such a parameter with one of the types below, as a string annotation in its
    `parameters` cell (so the cell needs no import):

        blocks: "list[Block] | None" = None   # block indices 0..L-1, negative from the end, or first/middle/last
        t_start: "Layer | None" = None        # an index of the states x(0..L) (x(0): the input of block 0)
        n_s: "Pilots | None" = None           # pseudo-sentences: a number, or a multiple of the width, "D", "1.5D"
        n_s: "FullBasis | None" = None        # the same, at least D (a full basis of the model's width)
        n_k: "Tokens" = 50                    # tokens per pseudo-sentence: with BOS, at most the context length

    `lotlib.book.parameters` checks every value against its type and, for these, against the model's `Shape`
    read from its configuration (no weights loaded), before any slow work. A chapter resolves the same values
    with the loaded model through `block_indices`, `layer_index`, `pilot_count` and `check_context`, which
    raise the same messages: the parameter, the model's L or D, and the valid range.
    """

    description = ""

    @staticmethod
    def accepts(value) -> bool:
        raise NotImplementedError

    @staticmethod
    def check(value, shape: Shape, param: str, values: dict) -> None:
        raise NotImplementedError


def _is_index(value) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)) or value in NAMES


class Layer(Bounded):
    """An index of the states x(0..L): 0..L, negative from the end, or first/middle/last."""

    description = "a layer (0..L, negative from the end, or first/middle/last)"
    accepts = staticmethod(_is_index)

    @staticmethod
    def check(value, shape, param, values):
        layer_index(value, shape.n_layers, param, shape.name)


class Block(Bounded):
    """An index of a block: 0..L-1, negative from the end, or first/middle/last."""

    description = "a block (0..L-1, negative from the end, or first/middle/last)"
    accepts = staticmethod(_is_index)

    @staticmethod
    def check(value, shape, param, values):
        block_index(value, shape.n_layers, param, shape.name)


class Pilots(Bounded):
    """A number of pseudo-sentences, or a multiple of the width: "D", "1.5D"."""

    description = (
        "a number of pseudo-sentences or a multiple of the width ('D', '1.5D')"
    )

    @staticmethod
    def accepts(value) -> bool:
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, str) and bool(WIDTH.match(value.replace(" ", "")))
        )

    @staticmethod
    def check(value, shape, param, values):
        pilot_count(value, shape.d_model, param, model=shape.name)

    @staticmethod
    def least(d_model: int) -> int:
        """The fewest pilots the type allows at width `d_model` (what None, all of the corpus, must reach)."""
        return 1


class FullBasis(Pilots):
    """`Pilots`, at least the width D (a chapter that needs a full D x D basis)."""

    description = "a number of pseudo-sentences of at least D, or a multiple of the width ('D', '1.5D')"

    @staticmethod
    def check(value, shape, param, values):
        pilot_count(value, shape.d_model, param, at_least_width=True, model=shape.name)

    @staticmethod
    def least(d_model: int) -> int:
        return d_model


class HeldOutBasis(Pilots):
    """`Pilots`, at least twice the width: a full D x D basis fitted on half of them, the other half scored."""

    description = "a number of pseudo-sentences of at least 2 D, or a multiple of the width ('3D')"

    @staticmethod
    def check(value, shape, param, values):
        n = pilot_count(value, shape.d_model, param, model=shape.name)
        if n is not None and n < 2 * shape.d_model:
            raise ParameterError(
                f"parameter {param} = {value!r} gives {n} pilots; {shape.name} (D = {shape.d_model}) needs at "
                f"least 2 D = {2 * shape.d_model}: the bases are fitted on half of them and the other half "
                f"is scored. Raise {param} (or None, all of the corpus)"
            )

    @staticmethod
    def least(d_model: int) -> int:
        return 2 * d_model


class PaperPilots(FullBasis):
    """`FullBasis`, a subset of the chapter's own pilots: at most its `n_s` when that is a number or a multiple
    of the width (None, all of the corpus, is checked once the corpus is cut)."""

    description = "a number of pseudo-sentences of at least D, at most n_s, or a multiple of the width ('2.8D')"

    @staticmethod
    def check(value, shape, param, values):
        want = pilot_count(value, shape.d_model, param, True, shape.name)
        have = pilot_count(values.get("n_s"), shape.d_model, "n_s", model=shape.name)
        if have is not None and want > have:
            raise ParameterError(
                f"parameter {param} = {value!r} asks for {want} pilots (D = {shape.d_model}) but "
                f"n_s = {values.get('n_s')!r} draws {have}: raise n_s to at least {want} (or None, all of "
                f"the corpus), or lower {param}"
            )


class Tokens(Bounded):
    """Tokens per pseudo-sentence: at least 2, and with BOS (the chapter's `bos`) at most the context length."""

    description = "a number of tokens of at least 2"

    @staticmethod
    def accepts(value) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value >= 2

    @staticmethod
    def check(value, shape, param, values):
        check_context(value, shape.max_positions, values.get("bos"), param, shape.name)


class Count(Bounded):
    """How many resamples, seeds, repetitions or splits: a whole number of at least 1, whatever the model."""

    description = (
        "a whole number of at least 1 (a count: resamples, seeds, repetitions)"
    )

    @staticmethod
    def accepts(value) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value >= 1

    @staticmethod
    def check(value, shape, param, values):
        """A count fits every model: `accepts` said all there is."""


TYPES = {
    cls.__name__: cls
    for cls in (
        Layer,
        Block,
        Pilots,
        FullBasis,
        HeldOutBasis,
        PaperPilots,
        Tokens,
        Count,
    )
}

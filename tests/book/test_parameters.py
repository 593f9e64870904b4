"""Declared parameter types: values are checked against them, and model-relative ones against the model's
shape, before anything runs; every chapter of the book declares a type for each of its parameters."""
import pytest

from lotlib.book.build import book_notebooks
from lotlib.book.parameters import check_parameters, conforms, declared_parameters
from lotlib.book.pipeline import project_root
from lotlib.book.spec import read_spec
from lotlib.models.bounds import (
    Block,
    ParameterError,
    block_indices,
    check_context,
    layer_index,
    model_shape,
    pilot_count,
)

from ..conftest import ROOT

CELL = '''model: str = "tiny"  # the model
n_s: "int | None" = None  # cap on pseudo-sentences
blocks: "list[Block] | None" = None  # blocks probed
t0: "Layer | None" = None  # start layer
n_pilots: "FullBasis | None" = None  # pilots
n_k: "Tokens" = 50  # tokens
bos: "bool | None" = None  # start with BOS (None: as the tokenizer does)
ratio = 0.5
'''


@pytest.fixture
def declared(tiny_gpt2_dir):
    return declared_parameters(CELL.replace('"tiny"', repr(str(tiny_gpt2_dir))), "chapter.py")


def test_declarations_are_read_with_types_and_help(declared):
    assert declared["n_s"].help == "cap on pseudo-sentences" and declared["n_s"].default is None
    assert conforms(3, declared["n_s"].annotation) and conforms(None, declared["n_s"].annotation)
    assert not conforms("abc", declared["n_s"].annotation) and not conforms(True, declared["n_s"].annotation)
    assert conforms([0, "middle", -1], declared["blocks"].annotation)
    assert not conforms([0, "center"], declared["blocks"].annotation)
    assert declared["ratio"].text == "float" and conforms(1, declared["ratio"].annotation)  # from the default
    untyped = declared_parameters("x = None\ny: int = 1\n")
    assert untyped["x"].annotation is None and untyped["y"].annotation is int


def test_wrong_types_name_the_parameter_type_and_value(declared):
    with pytest.raises(ParameterError, match=r"chapter.py: parameter n_s expects int \| None; got 'abc' \(str\)"):
        check_parameters(declared, {"n_s": "abc"}, "chapter.py")
    with pytest.raises(ParameterError, match="unknown parameter.*nn"):
        check_parameters(declared, {"nn": 1}, "chapter.py")
    with pytest.raises(ParameterError, match="Block is a block"):
        check_parameters(declared, {"blocks": [0.5]}, "chapter.py")


def test_model_relative_values_are_checked_against_the_config(declared):
    check_parameters(declared, {"blocks": [0, "middle", -1, 2], "t0": 3, "n_pilots": "D"}, "chapter.py")
    with pytest.raises(ParameterError, match=r"blocks = 3 is out of range: .* has 3 blocks; valid: blocks 0..2"):
        check_parameters(declared, {"blocks": [0, 3]}, "chapter.py")
    with pytest.raises(ParameterError, match=r"t0 = -5 is out of range: .* has 4 layers"):
        check_parameters(declared, {"t0": -5}, "chapter.py")
    with pytest.raises(ParameterError, match="n_pilots = 10 is below D = 64"):
        check_parameters(declared, {"n_pilots": 10}, "chapter.py")
    with pytest.raises(ParameterError, match=r"n_k = 128 plus BOS: .*context holds 128 positions; use n_k <= 127"):
        check_parameters(declared, {"n_k": 128, "bos": True}, "chapter.py")
    with pytest.raises(ParameterError, match=r"n_k = 128 plus a BOS if the tokenizer adds one: .*use n_k <= 127"):
        check_parameters(declared, {"n_k": 128, "bos": None}, "chapter.py")  # not known before the model loads
    check_parameters(declared, {"n_k": 128, "bos": False}, "chapter.py")


def test_resolution_with_a_loaded_model_matches_the_check():
    assert block_indices(["first", "middle", "last", -1], 18) == [0, 8, 17, 17]
    assert layer_index("middle", 30) == 15 and layer_index("last", 30) == 30 and layer_index(-1, 30) == 30
    assert pilot_count("1.5D", 576) == 864 and pilot_count(None, 576) is None
    with pytest.raises(ParameterError, match="blocks = 29 is out of range: gemma has 18 blocks"):
        block_indices([0, 29], 18, model="gemma")
    with pytest.raises(ParameterError, match="8192"):
        check_context(9000, 8192, model="smollm2-135m")
    assert Block.accepts("last") and not Block.accepts(True)


def test_model_shape_reads_only_the_config(tiny_llama_dir):
    shape = model_shape(str(tiny_llama_dir))
    assert (shape.n_layers, shape.d_model, shape.max_positions) == (3, 64, 128)


def test_every_chapter_declares_its_parameter_types():
    from IPython.core.interactiveshell import InteractiveShell

    root = project_root(ROOT)
    declared = {name: read_spec(root / "notebooks" / f"{name}.py").parameters for name in book_notebooks(root)}
    assert all(declared.values()), [name for name, ps in declared.items() if not ps]  # a parameters cell each
    missing = {name: [p for p, d in ps.items() if d.annotation is None] for name, ps in declared.items()}
    missing = {name: ps for name, ps in missing.items() if ps}
    assert not missing, f"parameters without a type: {missing}"
    # an annotated line that starts with a magic's name runs the magic (IPython's automagic): `notebook: str = ...`
    magics = set(InteractiveShell.instance().magics_manager.magics["line"])
    clashes = {name: sorted(set(d) & magics) for name, d in declared.items() if set(d) & magics}
    assert not clashes, f"parameters named like IPython magics: {clashes}"


def test_the_dtype_type_is_the_loaders_dtypes():
    from typing import get_args

    from lotlib.book.parameters import Dtype
    from lotlib.models.loading import DTYPES

    assert list(get_args(Dtype)) == list(DTYPES)
    declared = declared_parameters('dtype: "Dtype" = "float32"  # the weights\n')
    assert conforms("bfloat16", declared["dtype"].annotation) and not conforms("float64", declared["dtype"].annotation)



def test_a_held_out_basis_needs_twice_the_width_before_any_model_work(tiny_gpt2_dir):
    """B4 fits its bases on half the pilots and scores the other half: n_s below 2 D fails at the check, naming
    the limit (the tiny GPT-2 has D = 64: 2 D = 128)."""
    cell = f'model: str = {str(tiny_gpt2_dir)!r}  # m\nn_s: "HeldOutBasis | None" = None  # pilots\n'
    declared = declared_parameters(cell, "b4.py")
    check_parameters(declared, {"n_s": "2D"}, "b4.py")
    check_parameters(declared, {"n_s": None}, "b4.py")
    with pytest.raises(ParameterError, match=r"n_s = 'D' gives 64 pilots; .* needs at least 2 D = 128"):
        check_parameters(declared, {"n_s": "D"}, "b4.py")

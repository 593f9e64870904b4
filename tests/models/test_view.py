"""The model view against the model's own forward pass, for every supported family: the embedding is block
0's input, the trace sees every block, the one logit lens reproduces the model's logits, and the per-head
matrices rebuild each block's attention output exactly."""
import pytest
import torch

from lotlib import load_model

from ..conftest import FAMILY_FIXTURES


def _head_outputs(view, layer, x, position_embeddings=None):
    """Each head's write to the residual stream, `(B, H, T, d)`, from normalized input `x` `(B, T, d)`,
    rebuilt from the view's per-head matrices: the oracle `heads.b_O + _head_outputs(...).sum(1)` is
    held against the attention module's output (causal mask, sliding window where the block has one).
    `position_embeddings` are the rotary `(cos, sin)` the model passes to the block (None: GPT-2)."""
    w = view.heads(layer)
    x = x.float()
    q = torch.einsum("btd,hde->bhte", x, w.W_Q.float()) + w.b_Q[None, :, None].float()
    k = torch.einsum("btd,hde->bhte", x, w.W_K.float()) + w.b_K[None, :, None].float()
    v = torch.einsum("btd,hde->bhte", x, w.W_V.float()) + w.b_V[None, :, None].float()
    if w.q_norm is not None:
        q, k = w.q_norm(q), w.k_norm(k)
    q, k = view.rotate(q, k, position_embeddings)
    scores = q @ k.transpose(-1, -2) * w.scaling
    if (bias := _score_bias(view, x.shape[1])) is not None:  # MPNet's relative positions
        scores = scores + bias
    T = x.shape[1]
    i, j = torch.arange(T, device=x.device)[:, None], torch.arange(T, device=x.device)[None, :]
    allowed = j <= i if w.causal else torch.ones_like(j <= i)
    if w.sliding_window is not None:
        allowed &= i - j < w.sliding_window
    pattern = scores.masked_fill(~allowed, float("-inf")).softmax(-1)
    return torch.einsum("bhte,hed->bhtd", pattern @ v, w.W_O.float())


def _attention_io(model, layer, ids):
    """Input (kwargs) of block `layer`'s attention module and its heads' summed write (`head_write`) in a real
    forward pass."""
    seen = {}

    def pre(module, args, kwargs):
        seen["x"] = args[0] if args else kwargs["hidden_states"]
        seen["pos"] = kwargs.get("position_embeddings")

    def post(module, args, output):
        seen["out"] = output[0] if isinstance(output, tuple) else output

    hooks = [model.view.attention(layer).register_forward_pre_hook(pre, with_kwargs=True),
             model.view.head_write(layer).register_forward_hook(post)]
    with torch.no_grad():
        model.view.base(input_ids=ids, use_cache=False)
    for h in hooks:
        h.remove()
    return seen


def _check_rebuild(model, layer, ids, atol):
    io = _attention_io(model, layer, ids)
    heads = model.view.heads(layer)
    rebuilt = _head_outputs(model.view, layer, io["x"], io["pos"]).sum(1) + heads.b_O
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
    torch.testing.assert_close(x[0] @ (heads.W_V[2] @ heads.W_O[2]), (x[0] @ heads.W_V[2]) @ heads.W_O[2])


@pytest.mark.slow
def test_smollm2_heads_rebuild_attention(smollm2):
    ids = torch.tensor(smollm2.tokenizer("To kill two birds with one stone, said Thoreau.")["input_ids"])[None]
    for layer in (0, 14, 29):
        _check_rebuild(smollm2, layer, ids, atol=2e-4)


@pytest.mark.slow
def test_the_embedded_gemma_traces_as_it_runs():
    """The real Gemma 3 270M (de-quantized from its package): the trace is Hugging Face's hidden states and
    the logit lens its logits, on a sentence of Walden. The book's quick builds in the tests show other models
    through the null book's model (already in their cache), so this is where CI loads Gemma's weights."""
    gemma = load_model("gemma3-270m", device="cpu")
    ids = torch.tensor(gemma.tokenizer("Our life is frittered away by detail.")["input_ids"])[None]
    view, states = gemma.view, _traced(gemma.view, ids)
    with torch.no_grad():
        out = gemma.hf(ids, output_hidden_states=True)
    for t in (0, view.n_layers // 2, view.n_layers - 1):
        torch.testing.assert_close(states[t], out.hidden_states[t], rtol=1e-5, atol=1e-4)
    last = view.final_norm(states[view.n_layers])
    torch.testing.assert_close(last, out.hidden_states[-1], rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(view.logits(states[view.n_layers]), out.logits.float(), rtol=1e-3, atol=1e-3)


def _ids(T: int = 9, seed: int = 5) -> torch.Tensor:
    return torch.randint(0, 50257, (2, T), generator=torch.Generator().manual_seed(seed))


def _traced(view, ids):
    states = {}
    with view.trace(lambda t, x: states.__setitem__(t, x.detach().clone())):
        view.run(ids)
    return states


@pytest.mark.parametrize("fixture", FAMILY_FIXTURES)
def test_embed_logits_and_trace_match_the_model(fixture, request):
    model = load_model(str(request.getfixturevalue(fixture)), device="cpu")
    view, ids = model.view, _ids()
    states = _traced(view, ids)
    assert sorted(states) == list(range(view.n_layers + 1))
    positions = torch.arange(ids.shape[1]).expand_as(ids)
    torch.testing.assert_close(view.embed(ids, positions), states[0].float(), rtol=1e-6, atol=1e-6)
    with torch.no_grad():
        out = model.hf(ids, output_hidden_states=True)
    for t in range(view.n_layers):  # Hugging Face's last hidden state is taken after the final norm
        torch.testing.assert_close(states[t], out.hidden_states[t], rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(view.final_norm(states[view.n_layers]), out.hidden_states[-1], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(view.logits(states[view.n_layers]), out.logits.float(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("fixture", FAMILY_FIXTURES)
def test_trace_replaces_block_outputs(fixture, request):
    view = load_model(str(request.getfixturevalue(fixture)), device="cpu").view
    ids = _ids(T=5)
    before = _traced(view, ids)

    def zero_first_block(t, x):
        return torch.zeros_like(x) if t == 1 else None

    with view.trace(zero_first_block):
        replaced = view.run(ids).last_hidden_state
    assert not torch.allclose(replaced, view.final_norm(before[view.n_layers]))
    after = _traced(view, ids)  # the hooks are gone
    torch.testing.assert_close(after[view.n_layers], before[view.n_layers])


def test_gemma_quirks_live_in_the_view(tiny_gemma3_dir, tiny_gemma2_dir):
    gemma3 = load_model(str(tiny_gemma3_dir), device="cpu").view
    assert gemma3.embed_scale == pytest.approx(64 ** 0.5) and gemma3.W_P is None
    module = gemma3._final_norm_module
    torch.testing.assert_close(gemma3.final_norm.gamma, module.weight.detach() + 1.0)  # stored as gamma - 1
    gemma2 = load_model(str(tiny_gemma2_dir), device="cpu").view
    raw = torch.tensor([[-100.0, 0.0, 2.0, 100.0]])
    assert gemma2.finish_logits(raw).abs().max() <= 5.0  # soft-capped at 5
    assert torch.equal(gemma3.finish_logits(raw), raw)


@pytest.mark.parametrize("fixture", ["tiny_gemma3_dir", "tiny_qwen2_dir", "tiny_qwen3_dir"])
def test_more_families_rebuild_attention(fixture, request):
    model = load_model(str(request.getfixturevalue(fixture)), device="cpu")
    ids = _ids(T=9, seed=6)
    for layer in range(model.view.n_layers):
        _check_rebuild(model, layer, ids, atol=1e-5)


def _check_encoder(model, ids, atol):
    """A post-LN encoder seen as the book sees any model: x(0) is `embed`, every traced state is the model's
    own hidden state and the output of the norm `block_norm` names (the last block's: `final_norm`), the heads
    rebuild each attention's W_O output with no causal mask, and there are no logits."""
    from lotlib.models.view import NoReadout

    view = model.view
    states, normed = _traced(view, ids), {}
    hooks = [view.block_norm_module(t).register_forward_hook(lambda m, a, o, t=t: normed.__setitem__(t, o))
             for t in range(view.n_layers)]
    hooks.append(view._final_norm_module.register_forward_hook(lambda m, a, o: normed.__setitem__(view.n_layers, o)))
    with torch.no_grad():
        out = view.hf(input_ids=ids, output_hidden_states=True)
    for h in hooks:
        h.remove()
    positions = torch.arange(ids.shape[1]).expand_as(ids)
    torch.testing.assert_close(view.embed(ids, positions), states[0].float(), rtol=1e-5, atol=1e-5)
    for t in range(view.n_layers + 1):
        torch.testing.assert_close(states[t], out.hidden_states[t], rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(normed[t], states[t], rtol=1e-6, atol=1e-6)
    for layer in range(view.n_layers):
        assert not view.heads(layer).causal
        _check_rebuild(model, layer, ids, atol)
    with pytest.raises(NoReadout, match="no LM head"):
        view.logits(states[view.n_layers])


@torch.no_grad()
def _score_bias(view, T: int):
    """What the model adds to every head's attention scores from positions alone, for T tokens: MPNet's
    relative position bias `(H, T, T)` float32 (as its encoder computes it), None for every other family."""
    if view.family != "mpnet":
        return None
    x = torch.zeros(1, T, 1, device=view.device)
    return view.base.encoder.compute_position_bias(x)[0].float()


@pytest.mark.parametrize("fixture, family", [("tiny_bert_dir", "bert"), ("tiny_mpnet_dir", "mpnet")])
def test_a_post_ln_encoder_is_seen_like_every_other_model(fixture, family, request):
    folder = request.getfixturevalue(fixture)
    model = load_model(str(folder), device="cpu")
    view = model.view
    assert (view.family, view.post_norm, view.final_norm.kind, view.W_U) == (family, True, "layer", None)
    assert view.facts()["tied_text"].startswith("absent")
    rows, bias = view.readout_rows()  # no LM head: the probes read raw W_E, as GPT-2's tied head does
    assert bias is None and torch.equal(rows, view.W_E.float())
    assert view.facts()["readout_text"].startswith("W_E (no LM head")
    assert (_score_bias(view, 7) is None) == (family == "bert")
    _check_encoder(model, _ids(T=7), atol=1e-5)
    untrained = load_model(f"untrained:{folder}", device="cpu")
    assert untrained.identity != model.identity and untrained.view.post_norm


@pytest.mark.parametrize("fixture", ["tiny_bert_dir", "tiny_mpnet_dir"])
def test_trace_replaces_an_encoders_block_outputs(fixture, request):
    view = load_model(str(request.getfixturevalue(fixture)), device="cpu").view
    ids = _ids(T=5)
    before = _traced(view, ids)
    with view.trace(lambda t, x: torch.zeros_like(x) if t == 1 else None):
        replaced = _traced(view, ids)  # the outer replacement acts, the inner trace records
    assert not torch.allclose(replaced[view.n_layers], before[view.n_layers])
    torch.testing.assert_close(_traced(view, ids)[view.n_layers], before[view.n_layers])


def _packaged(name: str):
    from lotlib.models.sources import INSTALL_EXTRA, ModelNotFoundError

    try:
        return load_model(name, device="cpu")
    except ModelNotFoundError as err:
        pytest.skip(f"{name} is not installed ({INSTALL_EXTRA}): {err}")


@pytest.mark.parametrize("name, shape", [
    ("all-minilm-l6-v2", (6, 384, 12)),
    pytest.param("all-mpnet-base-v2", (12, 768, 12), marks=pytest.mark.slow),  # 438 MB, extracted once
])
def test_the_packaged_encoders_load_by_name_checked_and_are_seen_exactly(name, shape):
    """The trained LayerNorm encoders, from their packages, weights checked by sha256."""
    from lotlib.models.sources import PACKAGED

    model = _packaged(name)
    assert model.revision == PACKAGED[name].sha256
    view = model.view
    assert (view.n_layers, view.d_model, view.n_heads) == shape
    ids = torch.tensor(model.tokenizer("To kill two birds with one stone, said Thoreau.")["input_ids"])[None]
    _check_encoder(model, ids, atol=5e-5)


def test_what_a_model_lacks_is_known_from_its_config_alone(tiny_gpt2_dir):
    """An encoder lacks both parts a chapter may need (`LACKS`), a causal LM neither; a causal LM's probes read
    its own unembedding."""
    from lotlib.models.view import LACKS, lacking

    assert set(lacking("bert")) == set(lacking("mpnet")) == set(LACKS) == {"readout", "causal"}
    assert lacking("bert")["readout"].startswith("bert ships no LM head")
    assert lacking("gpt2") == lacking("llama") == {}
    view = load_model(str(tiny_gpt2_dir), device="cpu").view
    rows, _ = view.readout_rows()
    torch.testing.assert_close(rows, view.unembedding()[0])

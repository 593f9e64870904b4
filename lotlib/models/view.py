"""A model-agnostic view of a causal LM (or a post-LN encoder): embeddings, blocks, norms, readout, per-head
weights."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from .forward_clock import forward_pass
from .sources import context_length

FAMILIES = {
    "gpt2": "gpt2",
    "llama": "llama",
    "mistral": "llama",
    "qwen2": "llama",
    "qwen3": "llama",
    "gemma3_text": "gemma",
    "gemma2": "gemma",
    "gemma": "gemma",
    "bert": "bert",
    "mpnet": "mpnet",
}
# model types of post-LN encoders: loaded without LM head, attention not causal
ENCODERS = ("bert", "mpnet")
KINDS = ("layer", "rms")
LACKS = {
    "readout": "ships no LM head: it has no logits (no logit lens, no next token)",
    "causal": "is an encoder: every position attends to every other, so no position predicts the next "
    "token and the last token draws no line of thought",
}
"""What a chapter may need (its `needs`) and what an architecture without it lacks, in words."""


def lacking(model_type: str) -> dict[str, str]:
    """The parts of `LACKS` that a model of `model_type` (its config's) does not have, each with the reason
    in one line: both for a post-LN encoder, none for a causal LM."""
    if model_type not in ENCODERS:
        return {}
    return {need: f"{model_type} {why}" for need, why in LACKS.items()}


class NoReadout(NotImplementedError):
    """The model ships no LM head (an encoder): there are no logits to read."""


@dataclass(frozen=True)
class Norm:
    """LayerNorm (`kind="layer"`: center, scale, gamma, beta) or RMSNorm (`kind="rms"`: scale, gamma).

    `gamma` is the effective scale (Gemma stores gamma - 1); `beta` is None for RMSNorm. Every operation
    runs on the device of its input, in float32 (float64 for `second_moment` and `predicted_norm`).
    Before gamma, the normalized state has norm sqrt(d m / (m + eps)), m the `second_moment`: sqrt(d) up to eps.
    """

    kind: str
    gamma: Tensor
    beta: Tensor | None
    eps: float

    @classmethod
    def unit(cls, kind: str, d: int, eps: float) -> Norm:
        """A norm without gamma and beta (gamma = 1): only the centering (LayerNorm) and the scaling."""
        if kind not in KINDS:
            raise ValueError(f"norm kind must be one of {KINDS}, got {kind!r}")
        return cls(kind, torch.ones(d), None, eps)

    def with_kind(self, kind: str) -> Norm:
        """A `kind` norm with this norm's gamma and eps and no beta (LayerNorm's picture on an RMSNorm model)."""
        if kind not in KINDS:
            raise ValueError(f"norm kind must be one of {KINDS}, got {kind!r}")
        return Norm(kind, self.gamma, None, self.eps)

    def restrict(self, coords) -> Norm:
        """The same norm acting on a few coordinates only (gamma and beta restricted to `coords`)."""
        coords = list(coords)
        return Norm(
            self.kind,
            self.gamma[coords],
            None if self.beta is None else self.beta[coords],
            self.eps,
        )

    @property
    def centers(self) -> bool:
        """True when the norm projects on the hyperplane x . 1 = 0 before scaling (LayerNorm)."""
        return self.kind == "layer"

    def center(self, x: Tensor) -> Tensor:
        """The projection on the hyperplane x . 1 = 0 for LayerNorm, the identity for RMSNorm: `(..., d)`."""
        return x - x.mean(-1, keepdim=True) if self.centers else x

    def second_moment(self, x: Tensor) -> Tensor:
        """What the norm divides by before eps: variance (LayerNorm) or mean square (RMSNorm), float64 `(...)`."""
        return self.center(x.double()).pow(2).mean(-1)

    def predicted_norm(self, x: Tensor) -> Tensor:
        """||normalize(x)|| as eps makes it: sqrt(d m / (m + eps)), float64 `(...)`."""
        m = self.second_moment(x)
        return torch.sqrt(x.shape[-1] * m / (m + self.eps))

    def normalize(self, x: Tensor) -> Tensor:
        """The state on the sphere, before gamma and beta: `(..., d)`."""
        x = self.center(x.float())
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def __call__(self, x: Tensor) -> Tensor:
        y = self.normalize(x)
        y = y * self.gamma.to(y.device, torch.float32)
        return y if self.beta is None else y + self.beta.to(y.device, torch.float32)


@dataclass(frozen=True)
class Heads:
    """Per-head attention weights of one block in the `x @ W` convention (see module docstring)."""

    W_Q: Tensor
    W_K: Tensor
    W_V: Tensor
    W_O: Tensor
    b_Q: Tensor
    b_K: Tensor
    b_V: Tensor
    b_O: Tensor
    scaling: float  # the module's own score scale, 1/sqrt(d_head) unless the model says otherwise
    n_kv_heads: int
    q_norm: Norm | None = None  # per-head norms of q and k (Gemma 3, Qwen 3)
    k_norm: Norm | None = None
    sliding_window: int | None = None
    causal: bool = True  # False: every position attends to every other (an encoder)

    def W_QK(self, h: int) -> Tensor:
        """Bilinear form of head h on normalized states, `(d, d)`: score = x_q W_QK x_k^T."""
        return self.W_Q[h] @ self.W_K[h].T * self.scaling


class ModelView:
    """The parts of a causal LM that the papers talk about, whatever its architecture.

    Attributes: `family`, `base` (the model without LM head), `blocks`, `W_E` `(V, d)`, `W_P` `(n_ctx, d)`
    or None, `embed_scale` (for display: `embed` applies it), `final_norm`, `W_U` `(d, V)`, `b_U` or None,
    `tied`, `device`, `max_positions`.
    Methods every analysis goes through: `embed` (token ids -> the residual stream's input), `logits`
    (states -> logits, the one logit lens), `trace` (every block's input and output during a forward pass),
    `run` (that forward pass).

    Every architecture-specific detail of lotlib lives here, in `view.py`: which module is the embedding, the
    blocks, the norms; how the embedding is scaled (Gemma) or joined by learned positions (GPT-2) and
    normalized (BERT, MPNet); what a block returns; how logits are read (final norm, unembedding, bias, Gemma's
    soft cap). Analysis code asks the view (`embed`, `logits`, `trace`, `block_norm`, `heads`), never the model
    type. Tensors it returns live on the model's device. Weight matrices follow one convention, `x @ W`:

        W_Q, W_K, W_V: (H, d, d_head)   W_O: (H, d_head, d)   b_Q, b_K, b_V: (H, d_head)   b_O: (d,)

    Grouped-query attention is expanded: query head h uses key/value head h // (H / H_kv).

    Post-LN encoders (`ENCODERS`: BERT, MPNet) normalize after each residual add, so every state x(t) the view
    traces is already a LayerNorm's output. What stands in for GPT-2's `ln_1` of block t is the norm whose
    output block t's attention reads: the embedding norm for t = 0, block t - 1's last norm (`output.LayerNorm`)
    after it; for `ln_f`, the last block's last norm (what a readout or pooling would read). `post_norm` says
    which picture holds. They ship no LM head: `logits` raises `NoReadout`, and attention is not causal
    (`Heads.causal`). MPNet counts learned positions from its padding index + 1 (as RoBERTa) and adds a
    relative position bias to every head's scores.
    """

    def __init__(self, hf: nn.Module):
        model_type = hf.config.model_type
        if model_type not in FAMILIES:
            raise NotImplementedError(
                f"lotlib has no view for model_type {model_type!r}; supported: {', '.join(sorted(FAMILIES))}. "
                f"Add the family to lotlib/models/view.py."
            )
        self.hf = hf
        self.family = FAMILIES[model_type]
        self.base = hf.base_model
        self.post_norm = model_type in ENCODERS
        if self.post_norm:
            embeddings = self.base.embeddings
            self.blocks = list(self.base.encoder.layer)
            self.W_E = embeddings.word_embeddings.weight
            self.W_P = embeddings.position_embeddings.weight
            types = getattr(embeddings, "token_type_embeddings", None)  # BERT's
            self._type_row = None if types is None else types.weight[0]
            padding = getattr(embeddings, "padding_idx", None)  # MPNet's, as RoBERTa's
            self._position_offset = 0 if padding is None else padding + 1
            self._embedding_norm = embeddings.LayerNorm
            self._final_norm_module = self.blocks[-1].output.LayerNorm
        elif self.family == "gpt2":
            self.blocks = list(self.base.h)
            self.W_E = self.base.wte.weight
            self.W_P = self.base.wpe.weight
            self._final_norm_module = self.base.ln_f
        else:
            self.blocks = list(self.base.layers)
            self.W_E = self.base.embed_tokens.weight
            self.W_P = None
            self._final_norm_module = self.base.norm
        scale = (
            getattr(self.base.embed_tokens, "scalar_embed_scale", 1.0)
            if self.family == "gemma"
            else 1.0
        )
        self.embed_scale = float(scale)
        self._softcap = getattr(hf.config, "final_logit_softcapping", None)
        unembed = hf.get_output_embeddings()  # None: an encoder without LM head
        self.W_U = None if unembed is None else unembed.weight.T
        self.b_U = None if unembed is None else unembed.bias
        self.tied = unembed is not None and (
            unembed.weight.data_ptr() == self.W_E.data_ptr()
        )

    # sizes ------------------------------------------------------------------------------------
    @property
    def n_layers(self) -> int:
        return len(self.blocks)

    @property
    def d_model(self) -> int:
        return self.W_E.shape[1]

    @property
    def vocab_size(self) -> int:
        return self.W_E.shape[0]

    @property
    def n_heads(self) -> int:
        return self.hf.config.num_attention_heads

    @property
    def d_head(self) -> int:
        return getattr(self.hf.config, "head_dim", None) or self.d_model // self.n_heads

    @property
    def device(self) -> torch.device:
        return self.W_E.device

    @property
    def max_positions(self) -> int | None:
        """The longest sequence the model takes (learned positions or the configured context)."""
        return context_length(self.hf.config)

    # the residual stream's input and the readout -------------------------------------------------
    @torch.no_grad()
    def embed(
        self, ids: Tensor | None = None, positions: Tensor | None = None
    ) -> Tensor:
        """The residual stream's input for token `ids` `(...)` (all tokens when None): the embedding row times
        the model's embedding scale (Gemma: sqrt(d)), plus the learned position embedding at `positions`
        `(...)` where the model has one (GPT-2) and positions are given. `(..., d)` float32 on the model's device.
        Rotary models (Llama, Gemma) add positions inside attention, so `positions` changes nothing there. A
        post-LN encoder adds its token-type row (type 0: BERT) and normalizes the sum with its embedding norm;
        MPNet's position p is its row p + padding index + 1."""
        E = self.W_E.detach()
        rows = E if ids is None else E[torch.as_tensor(ids, device=self.device)]
        x = rows.float() * self.embed_scale
        if positions is not None and self.W_P is not None:
            rows = torch.as_tensor(positions, device=self.device)
            if self.post_norm:
                rows = rows + self._position_offset
            x = x + self.W_P.detach()[rows].float()
        if not self.post_norm:
            return x
        if self._type_row is not None:
            x = x + self._type_row.detach().float()
        return self._norm(self._embedding_norm)(x)

    @torch.no_grad()
    def unembedding(self) -> tuple[Tensor, Tensor | None]:
        """The rows logits are read against, `(V, d)` (W_U^T: W_E itself when tied), and the bias b_U `(V,)`
        or None; float32 on the model's device. Raises `NoReadout` for a model without LM head."""
        if self.W_U is None:
            raise NoReadout(
                f"{lacking(self.hf.config.model_type)['readout']}, so what reads them does not "
                "apply to it"
            )
        return (
            self.W_U.detach().float().T,
            None if self.b_U is None else self.b_U.detach().float(),
        )

    @torch.no_grad()
    def readout_rows(self) -> tuple[Tensor, Tensor | None]:
        """The rows the papers' probes read a state against, `(V, d)`, and a bias `(V,)` or None: the
        unembedding when the model has an LM head (`unembedding`), else the raw token embeddings W_E and no
        bias, the reading of GPT-2's tied head that Traveling Words uses (an encoder ships no head). float32
        on the model's device."""
        if self.W_U is None:
            return self.W_E.detach().float(), None
        return self.unembedding()

    @torch.no_grad()
    def logits(self, states: Tensor) -> Tensor:
        """The logit lens: states `(..., d)` taken before the final norm, read as the model reads its last
        state (final norm, unembedding, bias, and the soft cap of models that have one): `(..., V)` float32
        on the model's device."""
        y = self.final_norm(torch.as_tensor(states).to(self.device))
        W, b = self.unembedding()
        return self.finish_logits(y @ W.T if b is None else y @ W.T + b)

    def finish_logits(self, raw: Tensor) -> Tensor:
        """What the model does to y @ W_U + b_U before it calls them logits: the soft cap
        cap * tanh(raw / cap) of models that have one (Gemma 2), the identity otherwise. Monotone."""
        return (
            raw
            if self._softcap is None
            else torch.tanh(raw / self._softcap) * self._softcap
        )

    # the forward pass --------------------------------------------------------------------------
    @torch.no_grad()
    def run(self, ids, cache=None, **kwargs):
        """The base model (no LM head) on token ids `(N, T)` placed on the model's device. With `cache` (from
        `prefix_cache`) the ids continue the cached positions; `use_cache` is off unless given."""
        ids = torch.as_tensor(ids, dtype=torch.long).to(self.device)
        # transformers names the keyword `cache` from 5.2x on, `past_key_values` before
        if cache is not None:
            kwargs = {"use_cache": True, **kwargs, self._cache_keyword: cache}
        with forward_pass():  # the book's profile: forward passes against analysis
            return self.base(input_ids=ids, **{"use_cache": False, **kwargs})

    def prefix_cache(self, ids):
        """The key-value cache of a forward pass over token ids `(N, T)`, for `run(more_ids, cache=...)`."""
        out = self.run(ids, use_cache=True)
        return (
            out["cache"] if self._cache_keyword == "cache" else out["past_key_values"]
        )

    @property
    def _cache_keyword(self) -> str:
        return (
            "cache"
            if "cache" in inspect.signature(self.base.forward).parameters
            else "past_key_values"
        )

    @contextmanager
    def trace(self, visit: Callable[[int, Tensor], Tensor | None]) -> Iterator[None]:
        """Inside the `with` block, every forward pass calls `visit(t, x)` with x(0), block 0's input, and x(t),
        block t's output, t = 1..L, each `(B, T, d)` (the block's own output, whatever container the block
        returns it in). When `visit` returns a tensor for t >= 1, it replaces block t's output."""

        def input_hook(module, args, kwargs):
            visit(0, args[0] if args else kwargs["hidden_states"])

        def output_hook(module, args, output, t):
            hidden = output[0] if isinstance(output, tuple) else output
            new = visit(t, hidden)
            if new is None:
                return None
            return (new, *output[1:]) if isinstance(output, tuple) else new

        hooks = [self.blocks[0].register_forward_pre_hook(input_hook, with_kwargs=True)]
        hooks += [
            block.register_forward_hook(lambda m, a, o, t=t: output_hook(m, a, o, t))
            for t, block in enumerate(self.blocks, start=1)
        ]
        try:
            yield
        finally:
            for hook in hooks:
                hook.remove()

    # norms -------------------------------------------------------------------------------------
    @property
    def final_norm(self) -> Norm:
        return self._norm(self._final_norm_module)

    def block_norm_module(self, layer: int) -> nn.Module:
        """The module block `layer` runs on its input before attention (the model's own code); post-LN, the
        module whose output that input is."""
        if self.post_norm:
            # the norm whose output block `layer` reads (see the module docstring)
            return (
                self._embedding_norm
                if layer == 0
                else self.blocks[layer - 1].output.LayerNorm
            )
        block = self.blocks[layer]
        return block.ln_1 if self.family == "gpt2" else block.input_layernorm

    def block_norm(self, layer: int) -> Norm:
        """The norm that block `layer` applies to its input before attention."""
        return self._norm(self.block_norm_module(layer))

    def facts(self) -> dict[str, str]:
        """Words for prose on where this model differs from GPT-2: its final norm (`norm_text`), positions
        (`positions_text`), attention heads (`attention_text`), readout (`tied_text`), where its norms sit
        (`picture_text`) and the rows the probes read states against (`readout_text`, `readout_rows`)."""
        scale = "" if self.embed_scale == 1 else f" times {self.embed_scale:.4g}"
        n_kv = self.heads(0).n_kv_heads
        return {
            "norm_text": "LayerNorm"
            if self.final_norm.centers
            else "RMSNorm (no centering)",
            "positions_text": "learned positions added to x(0)"
            if self.W_P is not None
            else f"no learned positions (x(0) is the token's embedding row{scale})",
            "attention_text": f"{n_kv} key/value heads for {self.n_heads} query heads",
            "tied_text": "tied, as GPT-2's are: reading states against W_E is the model's own readout"
            if self.tied
            else "untied: W_E is not the model's readout W_U"
            if self.W_U is not None
            else "absent: an encoder ships no LM head",
            "picture_text": "a post-LN encoder: every state of its stream is a LayerNorm's output"
            if self.post_norm
            else "a pre-norm model: each block normalizes what it reads, and the stream itself is not "
            "normalized",
            "readout_text": "W_E (tied embeddings)"
            if self.tied
            else "W_U (untied, not W_E)"
            if self.W_U is not None
            else "W_E (no LM head: read as GPT-2's tied head reads)",
        }

    def reading_norms(self) -> list[Norm]:
        """The norm that reads x(t), t = 0..L: block t's input norm for t < L, the final norm at t = L."""
        return [self.block_norm(t) for t in range(self.n_layers)] + [self.final_norm]

    def _norm(self, module: nn.Module) -> Norm:
        if isinstance(module, nn.LayerNorm):
            return Norm(
                "layer", module.weight.detach(), module.bias.detach(), module.eps
            )
        gamma = module.weight.detach()
        eps = getattr(module, "variance_epsilon", None) or module.eps
        return Norm(
            "rms", gamma + 1.0 if self.family == "gemma" else gamma, None, float(eps)
        )

    # attention ---------------------------------------------------------------------------------
    def attention(self, layer: int) -> nn.Module:
        """Block `layer`'s attention module: its input is the (normalized) state its heads read."""
        block = self.blocks[layer]
        if self.post_norm:
            return (
                block.attention.self if self.family == "bert" else block.attention.attn
            )
        return block.attn if self.family == "gpt2" else block.self_attn

    def head_write(self, layer: int) -> nn.Module:
        """The module whose output (its first element when a tuple) is block `layer`'s heads' summed write,
        W_O and b_O applied: `attention(layer)` itself except in BERT, whose W_O is a module of its own."""
        if self.family == "bert":
            return self.blocks[layer].attention.output.dense
        return self.attention(layer)

    @torch.no_grad()
    def heads(self, layer: int) -> Heads:
        attn = self.attention(layer)
        H, dh, d = self.n_heads, self.d_head, self.d_model
        if self.family == "gpt2":
            W = attn.c_attn.weight  # Conv1D: (d, 3d), x @ W + b
            b = attn.c_attn.bias
            W_Q, W_K, W_V = (
                W[:, i * d : (i + 1) * d].reshape(d, H, dh).permute(1, 0, 2)
                for i in range(3)
            )
            b_Q, b_K, b_V = (b[i * d : (i + 1) * d].reshape(H, dh) for i in range(3))
            W_O = attn.c_proj.weight.reshape(H, dh, d)
            b_O, n_kv = attn.c_proj.bias, H
        elif self.post_norm:
            n_kv = H
            names = ("query", "key", "value") if self.family == "bert" else "qkv"
            (W_Q, b_Q), (W_K, b_K), (W_V, b_V) = (
                _linear_heads(getattr(attn, n), H, dh) for n in names
            )
            dense = self.head_write(layer) if self.family == "bert" else attn.o
            W_O, b_O = dense.weight.T.reshape(H, dh, d), dense.bias
        else:
            n_kv = self.hf.config.num_key_value_heads or H
            W_Q, b_Q = _linear_heads(attn.q_proj, H, dh)
            W_K, b_K = (
                _repeat_kv(t, H // n_kv) for t in _linear_heads(attn.k_proj, n_kv, dh)
            )
            W_V, b_V = (
                _repeat_kv(t, H // n_kv) for t in _linear_heads(attn.v_proj, n_kv, dh)
            )
            W_O = attn.o_proj.weight.T.reshape(H, dh, d)
            b_O = attn.o_proj.bias if attn.o_proj.bias is not None else W_O.new_zeros(d)
        q_norm, k_norm = (
            self._norm(getattr(attn, n)) if hasattr(attn, n) else None
            for n in ("q_norm", "k_norm")
        )
        return Heads(
            W_Q.detach(),
            W_K.detach(),
            W_V.detach(),
            W_O.detach(),
            b_Q.detach(),
            b_K.detach(),
            b_V.detach(),
            b_O.detach(),
            float(getattr(attn, "scaling", dh**-0.5)),  # MPNet divides by sqrt(d_head)
            n_kv,
            q_norm,
            k_norm,
            getattr(attn, "sliding_window", None),
            not self.post_norm,
        )

    @staticmethod
    def rotate(
        q: Tensor, k: Tensor, position_embeddings: tuple[Tensor, Tensor] | None
    ) -> tuple[Tensor, Tensor]:
        """Apply rotary position embeddings `(cos, sin)`, each `(B, T, d_head)`, to `(B, H, T, d_head)`."""
        if position_embeddings is None:
            return q, k
        cos, sin = (t.unsqueeze(1) for t in position_embeddings)
        return q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin


def _linear_heads(linear: nn.Linear, n: int, dh: int) -> tuple[Tensor, Tensor]:
    """nn.Linear (out=n*dh, in=d) -> W `(n, d, dh)` and b `(n, dh)`."""
    W = linear.weight.T.reshape(-1, n, dh).permute(1, 0, 2)
    b = linear.bias.reshape(n, dh) if linear.bias is not None else W.new_zeros(n, dh)
    return W, b


def _repeat_kv(t: Tensor, group: int) -> Tensor:
    return t.repeat_interleave(group, dim=0)


def _rotate_half(x: Tensor) -> Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)

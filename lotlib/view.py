"""A model-agnostic view of a causal LM: embeddings, blocks, norms, unembedding, per-head weights.

Every architecture-specific detail of lotlib lives in this file. Analysis code asks the view, never
the model type. Weight matrices follow one convention, `x @ W`:

    W_Q, W_K, W_V: (H, d, d_head)   W_O: (H, d_head, d)   b_Q, b_K, b_V: (H, d_head)   b_O: (d,)

Grouped-query attention is expanded: query head h uses key/value head h // (H / H_kv).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

FAMILIES = {
    "gpt2": "gpt2",
    "llama": "llama",
    "mistral": "llama",
    "qwen2": "llama",
    "qwen3": "llama",
    "gemma3_text": "gemma",
    "gemma2": "gemma",
    "gemma": "gemma",
}


@dataclass(frozen=True)
class Norm:
    """LayerNorm (`kind="layer"`: centre, scale, gamma, beta) or RMSNorm (`kind="rms"`: scale, gamma).

    `gamma` is the effective scale (Gemma stores gamma - 1); `beta` is None for RMSNorm.
    """

    kind: str
    gamma: Tensor
    beta: Tensor | None
    eps: float

    def normalize(self, x: Tensor) -> Tensor:
        """The state on the sphere, before gamma and beta: `(..., d)`."""
        x = x.float()
        if self.kind == "layer":
            x = x - x.mean(-1, keepdim=True)
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def __call__(self, x: Tensor) -> Tensor:
        y = self.normalize(x) * self.gamma.float()
        return y if self.beta is None else y + self.beta.float()


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

    def W_QK(self, h: int) -> Tensor:
        """Bilinear form of head h on normalized states, `(d, d)`: score = x_q W_QK x_k^T."""
        return self.W_Q[h] @ self.W_K[h].T * self.scaling

    def W_VO(self, h: int) -> Tensor:
        """Value-output map of head h, `(d, d)`: update = x W_VO."""
        return self.W_V[h] @ self.W_O[h]


class ModelView:
    """The parts of a causal LM that the papers talk about, whatever its architecture.

    Attributes: `family`, `base` (the model without LM head), `blocks`, `W_E` `(V, d)`, `W_P`
    `(n_ctx, d)` or None, `embed_scale`, `final_norm`, `W_U` `(d, V)`, `b_U` or None, `tied`.
    """

    def __init__(self, hf: nn.Module):
        model_type = hf.config.model_type
        if model_type not in FAMILIES:
            raise NotImplementedError(
                f"lotlib has no view for model_type {model_type!r}; supported: {', '.join(sorted(FAMILIES))}. "
                f"Add the family to lotlib/view.py."
            )
        self.hf = hf
        self.family = FAMILIES[model_type]
        self.base = hf.base_model
        if self.family == "gpt2":
            self.blocks = list(self.base.h)
            self.W_E = self.base.wte.weight
            self.W_P = self.base.wpe.weight
            self._final_norm_module = self.base.ln_f
        else:
            self.blocks = list(self.base.layers)
            self.W_E = self.base.embed_tokens.weight
            self.W_P = None
            self._final_norm_module = self.base.norm
        self.embed_scale = float(getattr(self.base.embed_tokens, "scalar_embed_scale", 1.0)) if self.family == "gemma" else 1.0
        unembed = hf.get_output_embeddings()
        self.W_U = unembed.weight.T
        self.b_U = unembed.bias
        self.tied = unembed.weight.data_ptr() == self.W_E.data_ptr()

    # sizes ------------------------------------------------------------------------------------
    @property
    def n_layers(self) -> int:
        return len(self.blocks)

    @property
    def d_model(self) -> int:
        return self.W_E.shape[1]

    @property
    def n_heads(self) -> int:
        return self.hf.config.num_attention_heads

    @property
    def d_head(self) -> int:
        return getattr(self.hf.config, "head_dim", None) or self.d_model // self.n_heads

    # norms -------------------------------------------------------------------------------------
    @property
    def final_norm(self) -> Norm:
        return self._norm(self._final_norm_module)

    def block_norm(self, layer: int) -> Norm:
        """The norm that block `layer` applies to its input before attention."""
        block = self.blocks[layer]
        return self._norm(block.ln_1 if self.family == "gpt2" else block.input_layernorm)

    def _norm(self, module: nn.Module) -> Norm:
        if isinstance(module, nn.LayerNorm):
            return Norm("layer", module.weight.detach(), module.bias.detach(), module.eps)
        gamma = module.weight.detach()
        eps = getattr(module, "variance_epsilon", None) or getattr(module, "eps")
        return Norm("rms", gamma + 1.0 if self.family == "gemma" else gamma, None, float(eps))

    # attention ---------------------------------------------------------------------------------
    def attention(self, layer: int) -> nn.Module:
        block = self.blocks[layer]
        return block.attn if self.family == "gpt2" else block.self_attn

    @torch.no_grad()
    def heads(self, layer: int) -> Heads:
        attn = self.attention(layer)
        H, dh, d = self.n_heads, self.d_head, self.d_model
        if self.family == "gpt2":
            W = attn.c_attn.weight  # Conv1D: (d, 3d), x @ W + b
            b = attn.c_attn.bias
            W_Q, W_K, W_V = (W[:, i * d:(i + 1) * d].reshape(d, H, dh).permute(1, 0, 2) for i in range(3))
            b_Q, b_K, b_V = (b[i * d:(i + 1) * d].reshape(H, dh) for i in range(3))
            W_O = attn.c_proj.weight.reshape(H, dh, d)
            b_O, n_kv = attn.c_proj.bias, H
        else:
            n_kv = self.hf.config.num_key_value_heads or H
            W_Q, b_Q = _linear_heads(attn.q_proj, H, dh)
            W_K, b_K = (_repeat_kv(t, H // n_kv) for t in _linear_heads(attn.k_proj, n_kv, dh))
            W_V, b_V = (_repeat_kv(t, H // n_kv) for t in _linear_heads(attn.v_proj, n_kv, dh))
            W_O = attn.o_proj.weight.T.reshape(H, dh, d)
            b_O = attn.o_proj.bias if attn.o_proj.bias is not None else W_O.new_zeros(d)
        q_norm, k_norm = (self._norm(getattr(attn, n)) if hasattr(attn, n) else None for n in ("q_norm", "k_norm"))
        return Heads(W_Q.detach(), W_K.detach(), W_V.detach(), W_O.detach(), b_Q.detach(), b_K.detach(),
                     b_V.detach(), b_O.detach(), float(attn.scaling), n_kv, q_norm, k_norm,
                     getattr(attn, "sliding_window", None))

    @staticmethod
    def rotate(q: Tensor, k: Tensor, position_embeddings: tuple[Tensor, Tensor] | None) -> tuple[Tensor, Tensor]:
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

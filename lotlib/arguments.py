"""The command line's arguments, checked before any slow work: each refusal names the flag, the limit and the
fix in one line."""

from __future__ import annotations

import os
from pathlib import Path

from .models.devices import DeviceRequest, resolve_device
from .models.sources import EMBEDDED, PACKAGED, split_name, split_revision


def pinned(model: str | None, revision: str | None) -> str | None:
    """`model` with `--revision` appended as MODEL@REVISION (the form every notebook's `model` takes); only a hub
    id has revisions."""
    if revision is None:
        return model
    if model is None:
        raise ValueError(
            f"--revision {revision} needs --model: the hub id it pins (--model ORG/NAME --revision {revision})"
        )
    base, untrained = split_name(model)
    if (
        base in EMBEDDED
        or base in PACKAGED
        or Path(base).expanduser().is_dir()
        or untrained
    ):
        raise ValueError(
            f"--revision {revision}: {model} is not a hub id (its weights are pinned by their sha256, not by a "
            f"revision); drop --revision, or give a hub id: --model ORG/NAME --revision {revision}"
        )
    if split_revision(base)[1] is not None:
        raise ValueError(
            f"--revision {revision}: --model {model} already names a revision; give it once"
        )
    return f"{model}@{revision}"


def checked_device(device: DeviceRequest | None) -> DeviceRequest | None:
    """`device` unchanged when torch can use it here (checked once, before any kernel starts)."""
    if device is not None:
        try:
            resolve_device(device)
        except ValueError as err:
            raise ValueError(f"--device {device}: {err}") from None
    return device


def folder_out(out: Path | None) -> Path | None:
    """`--out` of `sweep` and `book`: a folder that exists or can be made, and written, checked before any run."""
    if out is None:
        return None
    if out.exists() and not out.is_dir():
        raise ValueError(
            f"--out {out}: is a file; give a folder for the results (a new or existing one)"
        )
    writable(out, out)
    return out


def writable(folder: Path, out: Path) -> None:
    """Refuse `--out out` when `folder`, or the nearest folder above it that exists, cannot be written."""
    existing = next(p for p in [folder, *folder.absolute().parents] if p.exists())
    if not os.access(existing, os.W_OK):
        raise ValueError(f"--out {out}: {existing} is not writable; pick another --out")


def notebook_out(out: Path) -> Path:
    """`--out` of `run`: a notebook file whose folder can be written, checked before the run starts."""
    if out.is_dir() or out.suffix != ".ipynb":
        raise ValueError(
            f"--out {out}: expected the path of the executed notebook to write, ending in .ipynb "
            f"(such as {out / 'run.ipynb' if out.is_dir() else out.with_suffix('.ipynb')})"
        )
    writable(out.parent, out)
    return out

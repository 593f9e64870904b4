"""The key-value header of a GGUF file, read without its tensors: what a parameter check needs of an embedded
model (depth, width, context length, vocabulary) on a machine that has not de-quantized it yet."""

from __future__ import annotations

import struct
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

SCALARS = {
    0: "<B",
    1: "<b",
    2: "<H",
    3: "<h",
    4: "<I",
    5: "<i",
    6: "<f",
    7: "<?",
    10: "<Q",
    11: "<q",
    12: "<d",
}
STRING, ARRAY = 8, 9


class _Parts:
    """The parts of a split file read as one stream."""

    def __init__(self, paths: Iterable[Path]):
        self.files: list[BinaryIO] = [open(p, "rb") for p in paths]

    def read(self, n: int) -> bytes:
        out = b""
        while len(out) < n and self.files:
            chunk = self.files[0].read(n - len(out))
            out += chunk
            if len(out) < n:
                self.files.pop(0).close()
        if len(out) < n:
            raise ValueError("the GGUF header ends before its last key")
        return out

    def close(self) -> None:
        for f in self.files:
            f.close()


def _unpack(stream: _Parts, fmt: str):
    return struct.unpack(fmt, stream.read(struct.calcsize(fmt)))[0]


def _value(stream: _Parts, kind: int):
    """One value of type `kind`; an array is skipped and counted (its length is all lotlib reads of one)."""
    if kind in SCALARS:
        return _unpack(stream, SCALARS[kind])
    if kind == STRING:
        return stream.read(_unpack(stream, "<Q")).decode("utf-8", "replace")
    if kind == ARRAY:
        element, count = _unpack(stream, "<I"), _unpack(stream, "<Q")
        if element in SCALARS:
            stream.read(count * struct.calcsize(SCALARS[element]))
        else:
            for _ in range(count):
                _value(stream, element)
        return count
    raise ValueError(f"unknown GGUF value type {kind}")


def read_header(paths: list[Path]) -> dict:
    """The key-value pairs of the GGUF file made of `paths` (its parts, in order); arrays as their lengths.

    GGUF (v2, v3): the magic b"GGUF", a uint32 version, uint64 counts of tensors and of key-value pairs, then the
    pairs: a string key (uint64 length + UTF-8) and a typed value (uint32 type; arrays: element type, uint64
    count, elements). Only the header is read; a file split into parts is read across them."""
    stream = _Parts(paths)
    try:
        if stream.read(4) != b"GGUF":
            raise ValueError(f"{paths[0]} is not a GGUF file")
        version = _unpack(stream, "<I")
        if version < 2:
            raise ValueError(
                f"{paths[0]}: GGUF version {version} is not supported (2 or later)"
            )
        _unpack(stream, "<Q")  # tensors
        header = {}
        for _ in range(_unpack(stream, "<Q")):
            key = stream.read(_unpack(stream, "<Q")).decode()
            header[key] = _value(stream, _unpack(stream, "<I"))
        return header
    finally:
        stream.close()


def config_from_header(header: dict) -> dict:
    """The configuration keys lotlib's parameter checks read, named as transformers names them."""
    arch = header["general.architecture"]
    return {
        "model_type": arch,
        "num_hidden_layers": header[f"{arch}.block_count"],
        "hidden_size": header[f"{arch}.embedding_length"],
        "max_position_embeddings": header.get(f"{arch}.context_length"),
        "vocab_size": header.get(f"{arch}.vocab_size")
        or header["tokenizer.ggml.tokens"],
    }

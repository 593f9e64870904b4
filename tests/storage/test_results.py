"""Results kept by their inputs' contents: one computation per key, a new one when an input byte, a parameter
or the lotlib source changes, a damaged entry computed again, and keys that cannot carry content refused."""

import threading
import time

import numpy as np
import pytest
import torch

from lotlib.storage import results
from lotlib.storage.results import RESULTS_FOLDER, cached_result


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty lotlib cache for this test."""
    monkeypatch.setenv("LOTLIB_CACHE_DIR", str(tmp_path))
    return tmp_path


class Counted:
    """A compute function that counts its calls and returns the sum of an array with an offset."""

    def __init__(self, X: np.ndarray, offset: float = 0.0):
        self.X, self.offset, self.calls = X, offset, 0

    def __call__(self) -> dict:
        self.calls += 1
        return {"sum": self.X.sum() + self.offset, "rows": self.X.copy()}


def _entries(cache, kind: str) -> list:
    return sorted((cache / RESULTS_FOLDER).glob(f"*/{kind}/*.pkl"))


def test_the_same_key_is_computed_once(cache):
    X = np.arange(12.0).reshape(3, 4)
    compute = Counted(X)
    first = cached_result("demo", {"X": X, "n": 3}, compute)
    again = cached_result(
        "demo", {"X": X.copy(), "n": 3}, compute
    )  # same content, other object
    assert compute.calls == 1 and again["sum"] == first["sum"] == 66.0
    np.testing.assert_array_equal(again["rows"], X)
    other_kind = Counted(X)
    cached_result("other", {"X": X, "n": 3}, other_kind)
    assert other_kind.calls == 1 and len(_entries(cache, "demo")) == 1


@pytest.mark.parametrize(
    "changed",
    [
        lambda key: {
            **key,
            "X": np.where(np.arange(12.0) == 5, 5.5, key["X"]),
        },  # one value
        lambda key: {**key, "X": key["X"].astype(np.float32)},  # the dtype
        lambda key: {**key, "X": key["X"].reshape(3, 4)},  # the shape, same bytes
        lambda key: {**key, "n": 4},  # a parameter
        lambda key: {**key, "n": 3.0},  # a parameter's type
        lambda key: {**key, "seeds": [0, 2]},  # an item of a sequence
        lambda key: {**key, "extra": None},  # one more part
    ],
)
def test_a_changed_input_byte_or_parameter_is_computed_anew(cache, changed):
    key = {"X": np.arange(12.0), "n": 3, "seeds": [0, 1]}
    compute = Counted(key["X"])
    cached_result("demo", key, compute)
    cached_result("demo", changed(key), compute)
    assert compute.calls == 2 and len(_entries(cache, "demo")) == 2


def test_a_change_of_the_lotlib_source_is_computed_anew(cache, monkeypatch):
    X = np.ones(4)
    compute = Counted(X)
    cached_result("demo", {"X": X}, compute)
    monkeypatch.setattr(results, "lotlib_source_digest", lambda: "another lotlib")
    cached_result("demo", {"X": X}, compute)
    assert compute.calls == 2


def test_a_damaged_entry_is_computed_again_and_replaced(cache):
    X = np.arange(6.0)
    compute = Counted(X)
    cached_result("demo", {"X": X}, compute)
    (entry,) = _entries(cache, "demo")
    blob = bytearray(entry.read_bytes())
    blob[-3] ^= 0xFF  # one flipped byte in the payload
    entry.write_bytes(bytes(blob))
    value = cached_result("demo", {"X": X}, compute)
    assert compute.calls == 2 and value["sum"] == 15.0
    assert entry.read_bytes() != bytes(blob)  # replaced by a verified entry
    cached_result("demo", {"X": X}, compute)
    assert compute.calls == 2
    entry.write_bytes(entry.read_bytes()[:20])  # cut short
    assert (
        cached_result("demo", {"X": X}, compute)["sum"] == 15.0 and compute.calls == 3
    )


@pytest.mark.parametrize("part", [object(), {1, 2}, torch.device("cpu")])
def test_a_key_part_without_content_is_refused_naming_its_type(cache, part):
    with pytest.raises(TypeError, match=type(part).__name__):
        cached_result("demo", {"X": np.ones(2), "part": [part]}, Counted(np.ones(2)))


def test_a_second_caller_waits_for_the_first_and_reads_its_value(cache):
    X, calls = np.arange(3.0), []

    def slow() -> float:
        calls.append(threading.get_ident())
        time.sleep(0.3)
        return float(X.sum())

    values = []
    threads = [
        threading.Thread(
            target=lambda: values.append(cached_result("demo", {"X": X}, slow))
        )
        for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert values == [3.0, 3.0] and len(calls) == 1


def test_an_entry_this_process_cannot_unpickle_is_computed_again(cache):
    """An entry written where its value's libraries had other versions (a shared cache) verifies, but does
    not load here."""
    import hashlib

    X = np.arange(4.0)
    compute = Counted(X)
    cached_result("demo", {"X": X}, compute)
    (entry,) = _entries(cache, "demo")
    payload = b"cnot_a_module_here\nThing\n."  # a global of a module this process lacks
    entry.write_bytes(hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload)
    assert cached_result("demo", {"X": X}, compute)["sum"] == 6.0 and compute.calls == 2
    cached_result("demo", {"X": X}, compute)
    assert compute.calls == 2


def test_an_upgraded_numeric_library_keys_new_entries(monkeypatch):
    """A result computed under another numpy (or scipy, scikit-learn, torch) is not read back."""
    from lotlib.storage import results

    key = {"x": np.arange(4.0)}
    before = results.result_key("demo", key)
    monkeypatch.setattr(results, "version", lambda name: "0.0-other")
    results.lotlib_source_digest.cache_clear()
    try:
        assert results.result_key("demo", key) != before
    finally:
        monkeypatch.undo()
        results.lotlib_source_digest.cache_clear()
    assert results.result_key("demo", key) == before

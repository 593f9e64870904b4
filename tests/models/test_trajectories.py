"""The trajectory cache: hits, keys, resume after interruption, corrupt shards rebuilt."""
import json

import numpy as np
import pytest

import lotlib.models.trajectories as traj
from lotlib import gibberish, load_model, trajectories


@pytest.fixture
def model(tiny_llama_dir):
    return load_model(str(tiny_llama_dir))


@pytest.fixture
def counting(monkeypatch):
    """Counts calls to capture() made by the cache; `fail_after` simulates an interruption."""
    calls = {"n": 0, "fail_after": None}
    real = traj.capture

    def wrapped(*args, **kwargs):
        if calls["fail_after"] is not None and calls["n"] >= calls["fail_after"]:
            raise KeyboardInterrupt
        calls["n"] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(traj, "capture", wrapped)
    return calls


def _folder(model, corpus, **options):
    key = traj.cache_key(model, corpus, options.get("all_positions", False), "float32", options["shard_size"])
    return traj.cache_folder(key)


def test_second_call_is_a_cache_hit(model, counting):
    corpus = gibberish(50257, n_s=10, n_k=6, seed=3)
    first = trajectories(model, corpus, shard_size=4, progress=False)
    assert counting["n"] == 3
    second = trajectories(model, corpus, shard_size=4, progress=False)
    assert counting["n"] == 3
    np.testing.assert_array_equal(first, second)
    assert first.shape == (10, 4, 64)


def test_key_changes_with_corpus_model_and_options(model, tiny_gpt2_dir):
    a = gibberish(50257, n_s=4, n_k=6, seed=0)
    b = gibberish(50257, n_s=4, n_k=6, seed=1)
    other = load_model(str(tiny_gpt2_dir))
    untrained = load_model(str(tiny_gpt2_dir), untrained=True, seed=5)
    folders = {_folder(model, a, shard_size=4), _folder(model, b, shard_size=4), _folder(other, a, shard_size=4),
               _folder(untrained, a, shard_size=4), _folder(model, a, shard_size=4, all_positions=True)}
    assert len(folders) == 5


def test_resume_after_interruption_gives_identical_result(model, counting):
    corpus = gibberish(50257, n_s=10, n_k=6, seed=4)
    counting["fail_after"] = 2
    with pytest.raises(KeyboardInterrupt):
        trajectories(model, corpus, shard_size=4, progress=False)
    folder = _folder(model, corpus, shard_size=4)
    assert sorted(json.loads((folder / "manifest.json").read_text())) == ["shard-00000.npy", "shard-00001.npy"]
    counting["fail_after"] = None
    resumed = trajectories(model, corpus, shard_size=4, progress=False)
    assert counting["n"] == 3  # only the missing shard was computed
    np.testing.assert_array_equal(resumed, traj.capture(model, corpus.ids, progress=False))


def test_corrupt_shard_is_detected_and_rebuilt(model, counting):
    corpus = gibberish(50257, n_s=8, n_k=6, seed=5)
    clean = trajectories(model, corpus, shard_size=4, progress=False)
    shard = _folder(model, corpus, shard_size=4) / "shard-00001.npy"
    raw = bytearray(shard.read_bytes())
    raw[-5] ^= 0xFF  # flip bits inside the float data: still a loadable .npy, but wrong
    shard.write_bytes(bytes(raw))
    with pytest.warns(UserWarning, match="does not match its recorded sha256"):
        again = trajectories(model, corpus, shard_size=4, progress=False)
    assert counting["n"] == 3
    np.testing.assert_array_equal(again, clean)


def test_cache_folder_stays_inside_the_cache_for_paths_and_hub_ids(model):
    from lotlib.storage.paths import cache_dir

    corpus = gibberish(50257, n_s=2, n_k=4)
    for name in ("/some/local/folder", "meta-llama/Llama-3.2-1B"):
        key = {**traj.cache_key(model, corpus, False, "float32", 4), "model": name}
        assert traj.cache_folder(key).parent == cache_dir() / "trajectories"

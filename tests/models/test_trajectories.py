"""The trajectory cache: hits, keys, resume after interruption, corrupt shards rebuilt, a lost manifest rebuilt
without recomputing, reading without write access, clear errors for inputs with nothing to extract."""
import json
import warnings

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
    listed = sorted(json.loads((folder / "manifest.json").read_text()))
    assert [name[:11] for name in listed] == ["shard-00000", "shard-00001"]
    counting["fail_after"] = None
    resumed = trajectories(model, corpus, shard_size=4, progress=False)
    assert counting["n"] == 3  # only the missing shard was computed
    np.testing.assert_array_equal(resumed, traj.capture(model, corpus.ids, progress=False))


def test_corrupt_shard_is_detected_and_rebuilt(model, counting):
    corpus = gibberish(50257, n_s=8, n_k=6, seed=5)
    clean = trajectories(model, corpus, shard_size=4, progress=False)
    shard, = _folder(model, corpus, shard_size=4).glob("shard-00001-*.npy")
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


def test_a_lost_manifest_is_rebuilt_without_recomputing(model, counting):
    corpus = gibberish(50257, n_s=8, n_k=6, seed=6)
    clean = trajectories(model, corpus, shard_size=4, progress=False)
    manifest = _folder(model, corpus, shard_size=4) / "manifest.json"
    listed = json.loads(manifest.read_text())
    manifest.unlink()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "does not match" warning: each shard's name carries its sha256
        again = trajectories(model, corpus, shard_size=4, progress=False)
    assert counting["n"] == 2  # nothing recomputed
    np.testing.assert_array_equal(again, clean)
    assert json.loads(manifest.read_text()) == listed


def test_entries_from_before_shards_named_their_sha256_are_still_read(model, counting):
    corpus = gibberish(50257, n_s=8, n_k=6, seed=7)
    clean = trajectories(model, corpus, shard_size=4, progress=False)
    folder = _folder(model, corpus, shard_size=4)
    old = {}
    for shard in sorted(folder.glob("shard-*.npy")):  # the old layout: shard-00000.npy, sha256 in the manifest
        old[shard.name[:11] + ".npy"] = shard.name[12:-4]
        shard.rename(folder / (shard.name[:11] + ".npy"))
    (folder / "manifest.json").write_text(json.dumps(old))
    np.testing.assert_array_equal(trajectories(model, corpus, shard_size=4, progress=False), clean)
    assert counting["n"] == 2
    (folder / "manifest.json").unlink()  # an old entry without its manifest cannot verify: recomputed, and said so
    with pytest.warns(UserWarning, match="has no recorded sha256"):
        np.testing.assert_array_equal(trajectories(model, corpus, shard_size=4, progress=False), clean)
    assert counting["n"] == 4 and sorted(p.name[:12] for p in folder.glob("shard-*")) == ["shard-00000-",
                                                                                             "shard-00001-"]


def test_a_cache_that_cannot_be_locked_serves_what_it_holds(model, counting, monkeypatch):
    from lotlib.storage.paths import NotWritableError, not_writable

    corpus = gibberish(50257, n_s=8, n_k=6, seed=8)
    clean = trajectories(model, corpus, shard_size=4, progress=False)

    def no_lock(path):
        raise not_writable(path, OSError(30, "Read-only file system"))

    monkeypatch.setattr(traj, "file_lock", no_lock)
    np.testing.assert_array_equal(trajectories(model, corpus, shard_size=4, progress=False), clean)
    missing = gibberish(50257, n_s=8, n_k=6, seed=9)
    with pytest.raises(NotWritableError, match="Read-only file system.*lacks this entry.*LOTLIB_CACHE_DIR"):
        trajectories(model, missing, shard_size=4, progress=False)
    assert not _folder(model, missing, shard_size=4).exists()


def test_inputs_with_nothing_to_extract_are_clear_errors_and_leave_no_folder(model):
    from lotlib import Corpus

    empty = Corpus("empty", np.zeros((0, 6), dtype=np.int64))
    with pytest.raises(ValueError, match="is empty: there are no pseudo-sentences"):
        trajectories(model, empty, progress=False)
    corpus = gibberish(50257, n_s=4, n_k=6, seed=10)
    with pytest.raises(ValueError, match="batch_size and shard_size must be at least 1.*batch_size = 0"):
        trajectories(model, corpus, batch_size=0, progress=False)
    for folder in (_folder(model, empty, shard_size=256), _folder(model, corpus, shard_size=256)):
        assert not folder.exists() and not folder.with_name(folder.name + ".lock").exists()


def test_cache_files_take_the_umask_permissions(model):
    import os

    corpus = gibberish(50257, n_s=2, n_k=6, seed=11)
    before = os.umask(0o022)
    try:
        trajectories(model, corpus, shard_size=4, progress=False)
    finally:
        os.umask(before)
    folder = _folder(model, corpus, shard_size=4)
    modes = {p.name[:8]: p.stat().st_mode & 0o777 for p in folder.iterdir()}
    assert modes == {"key.json": 0o644, "manifest": 0o644, "shard-00": 0o644}

"""The trajectory cache: hits, keys, shards shared by corpora with the same rows, resume after interruption,
corrupt shards rebuilt, runs that fill the same shards at once, reading without write access, clear errors for
inputs with nothing to extract."""
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


def _folder(model, **options):
    return traj.cache_folder(traj.cache_key(model, options.get("all_positions", False), "float32",
                                            options["shard_size"]))


def _shard_files(model, ids, shard_size=4):
    return sorted(_folder(model, shard_size=shard_size).glob(f"shard-{traj.ids_digest(ids)}-*.npy"))


def test_second_call_is_a_cache_hit(model, counting):
    corpus = gibberish(50257, n_s=10, n_k=6, seed=3)
    first = trajectories(model, corpus, shard_size=4, progress=False)
    assert counting["n"] == 3
    second = trajectories(model, corpus, shard_size=4, progress=False)
    assert counting["n"] == 3
    np.testing.assert_array_equal(first, second)
    assert first.shape == (10, 4, 64)


def test_corpora_that_share_rows_share_their_shards(model, counting):
    from lotlib import Corpus

    corpus = gibberish(50257, n_s=10, n_k=6, seed=12)
    whole = trajectories(model, corpus, shard_size=4, progress=False)
    prefix = Corpus("prefix", corpus.ids[:9])  # two full shards shared, a last partial one of its own
    found = trajectories(model, prefix, shard_size=4, progress=False)
    np.testing.assert_array_equal(found[:8], whole[:8])  # the shared shards, read back
    # the partial shard is a forward pass of row 8 alone, where `whole` ran it beside row 9: the CPU's
    # kernels may round a batch of one differently in the last bits
    np.testing.assert_allclose(found[8], whole[8], rtol=1e-5, atol=1e-7)
    assert counting["n"] == 3 + 1
    np.testing.assert_array_equal(trajectories(model, Corpus("eight", corpus.ids[:8]), shard_size=4,
                                               progress=False), whole[:8])
    assert counting["n"] == 4


def test_key_changes_with_model_and_options_and_the_shard_name_with_the_ids(model, tiny_gpt2_dir):
    other = load_model(str(tiny_gpt2_dir))
    untrained = load_model(str(tiny_gpt2_dir), untrained=True, seed=5)
    folders = {_folder(model, shard_size=4), _folder(other, shard_size=4), _folder(untrained, shard_size=4),
               _folder(model, shard_size=4, all_positions=True), _folder(model, shard_size=8)}
    assert len(folders) == 5
    a, b = (gibberish(50257, n_s=4, n_k=6, seed=seed).ids for seed in (0, 1))
    assert len({traj.ids_digest(a), traj.ids_digest(b), traj.ids_digest(a[:2]), traj.ids_digest(a[:, :4])}) == 4


def test_resume_after_interruption_gives_identical_result(model, counting):
    corpus = gibberish(50257, n_s=10, n_k=6, seed=4)
    counting["fail_after"] = 2
    with pytest.raises(KeyboardInterrupt):
        trajectories(model, corpus, shard_size=4, progress=False)
    assert [len(_shard_files(model, corpus.ids[i:i + 4])) for i in (0, 4, 8)] == [1, 1, 0]
    counting["fail_after"] = None
    resumed = trajectories(model, corpus, shard_size=4, progress=False)
    assert counting["n"] == 3  # only the missing shard was computed
    np.testing.assert_array_equal(resumed, traj.capture(model, corpus.ids, progress=False))


def test_corrupt_shard_is_detected_and_rebuilt(model, counting):
    corpus = gibberish(50257, n_s=8, n_k=6, seed=5)
    clean = trajectories(model, corpus, shard_size=4, progress=False)
    shard, = _shard_files(model, corpus.ids[4:8])
    raw = bytearray(shard.read_bytes())
    raw[-5] ^= 0xFF  # flip bits inside the float data: still a loadable .npy, but wrong
    shard.write_bytes(bytes(raw))
    with pytest.warns(UserWarning, match="does not match its recorded sha256"):
        again = trajectories(model, corpus, shard_size=4, progress=False)
    assert counting["n"] == 3
    np.testing.assert_array_equal(again, clean)
    assert len(_shard_files(model, corpus.ids[4:8])) == 1


def test_cache_folder_stays_inside_the_cache_for_paths_and_hub_ids(model):
    from lotlib.storage.paths import cache_dir

    for name in ("/some/local/folder", "meta-llama/Llama-3.2-1B"):
        key = {**traj.cache_key(model, False, "float32", 4), "model": name}
        assert traj.cache_folder(key).parent == cache_dir() / "trajectories"


def test_runs_filling_the_same_shards_at_once_share_the_work(model, tiny_llama_dir, counting):
    from concurrent.futures import ThreadPoolExecutor

    corpus = gibberish(50257, n_s=24, n_k=6, seed=13)
    runs = [model, load_model(str(tiny_llama_dir))]  # a model each: capture hooks its own modules
    assert runs[0] is not runs[1]
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda lm: trajectories(lm, corpus, shard_size=4, progress=False), runs))
    assert counting["n"] == 6  # each shard computed once, by one of the two
    np.testing.assert_array_equal(results[0], results[1])
    np.testing.assert_array_equal(results[0], traj.capture(model, corpus.ids, progress=False))


def test_a_cache_that_cannot_be_locked_serves_what_it_holds(model, counting, monkeypatch):
    from lotlib.storage.paths import NotWritableError, not_writable

    corpus = gibberish(50257, n_s=8, n_k=6, seed=8)
    clean = trajectories(model, corpus, shard_size=4, progress=False)

    def no_lock(path, wait=True):
        raise not_writable(path, OSError(30, "Read-only file system"))

    monkeypatch.setattr(traj, "file_lock", no_lock)
    np.testing.assert_array_equal(trajectories(model, corpus, shard_size=4, progress=False), clean)
    missing = gibberish(50257, n_s=8, n_k=6, seed=9)
    with pytest.raises(NotWritableError, match="Read-only file system.*lacks this entry.*LOTLIB_CACHE_DIR"):
        trajectories(model, missing, shard_size=4, progress=False)
    assert _shard_files(model, missing.ids[:4]) == []


def test_inputs_with_nothing_to_extract_are_clear_errors_and_leave_no_folder(model):
    from lotlib import Corpus

    empty = Corpus("empty", np.zeros((0, 6), dtype=np.int64))
    with pytest.raises(ValueError, match="is empty: there are no pseudo-sentences"):
        trajectories(model, empty, progress=False)
    corpus = gibberish(50257, n_s=4, n_k=6, seed=10)
    with pytest.raises(ValueError, match="batch_size and shard_size must be at least 1.*batch_size = 0"):
        trajectories(model, corpus, batch_size=0, progress=False)
    assert _shard_files(model, corpus.ids, shard_size=64) == []


def test_cache_files_take_the_umask_permissions(model):
    import os

    corpus = gibberish(50257, n_s=2, n_k=6, seed=11)
    before = os.umask(0o022)
    try:
        trajectories(model, corpus, shard_size=4, progress=False)
    finally:
        os.umask(before)
    files = {p.name.split("-")[0].split(".")[0] + p.suffix: p.stat().st_mode & 0o777
             for p in _folder(model, shard_size=4).iterdir()}
    assert files == {"key.json": 0o644, "shard.npy": 0o644, "shard.lock": 0o644}

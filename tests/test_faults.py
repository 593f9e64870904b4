"""Faults a user's disk and fingers cause: each either repairs itself with the same numbers or stops at once
with one line naming the file or the parameter, and nothing lotlib writes is left half-written or poisoned."""
import errno
import io
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from lotlib.book.spec import read_spec
from lotlib.book.sweep import SweepError, validate_grid
from lotlib.cli import main
from lotlib.models import sources
from lotlib.models.trajectories import NonFiniteTrajectories, _find, finite
from lotlib.storage.atomic import write_text_atomic
from lotlib.storage.manifest import damaged_files, folder_manifest
from lotlib.storage.paths import NotWritableError

from .conftest import ROOT

SECONDS = 10  # the bound for a bad argument to fail


# ---- the de-quantized model cache ----

def _fake_build(folder: Path, weights: bytes, builds: list) -> None:
    """What `_dequantize` does, small: a folder built in a temporary one and finished with its manifest."""
    built = folder.parent / f".tmp-{len(builds)}"
    built.mkdir(parents=True)
    (built / "model.safetensors").write_bytes(weights)
    (built / "config.json").write_text("{}")
    builds.append(folder)
    sources._finish(built, folder, {"name": "fake"})


@pytest.fixture
def fake_model(tmp_path, monkeypatch):
    """A model folder built by a fake builder, as `embedded_folder` builds one: (folder, builds, weights)."""
    folder, builds, weights = tmp_path / "models" / "fake-0123", [], bytes(range(256)) * 4096

    def load() -> Path:
        if not sources.built_intact(folder):
            sources._rebuild(folder, lambda: _fake_build(folder, weights, builds))
        return folder

    load()
    return load, builds, weights


@pytest.mark.parametrize("damage", ["zeros", "random", "truncated", "missing"])
def test_a_damaged_model_cache_is_rebuilt_to_the_same_bytes(fake_model, damage, capfd):
    load, builds, weights = fake_model
    file = load() / "model.safetensors"
    if damage == "zeros":
        with open(file, "r+b") as f:  # in place, as `dd conv=notrunc` does
            f.seek(1000)
            f.write(bytes(5000))
    elif damage == "random":
        with open(file, "r+b") as f:
            f.write(np.random.default_rng(0).bytes(5000))
    elif damage == "truncated":
        os.truncate(file, 100)
    else:
        file.unlink()
    assert load() / "model.safetensors" == file and file.read_bytes() == weights and len(builds) == 2
    assert "model.safetensors differ from what was written" in capfd.readouterr().err


def test_an_intact_model_cache_is_hashed_once_then_checked_by_size_and_stamp(fake_model, monkeypatch):
    load, builds, _ = fake_model
    load()  # the first check hashes and writes the stamp
    hashed = []
    monkeypatch.setattr("lotlib.storage.manifest.sha256_file", lambda p: hashed.append(p) or "x")
    assert load() and hashed == [] and len(builds) == 1


def test_a_damaged_cache_that_cannot_be_rebuilt_stops_naming_the_folder_and_the_repair(fake_model, monkeypatch):
    load, _, _ = fake_model
    folder = load()
    os.truncate(folder / "model.safetensors", 10)

    def read_only():
        raise PermissionError(errno.EACCES, "Permission denied", str(folder.parent))

    with pytest.raises(sources.ModelCacheError, match=rf"{folder}.*rm -r {folder}.*LOTLIB_CACHE_DIR"):
        sources._rebuild(folder, read_only)


def test_a_model_cache_that_fills_the_disk_names_the_disk_and_keeps_nothing(fake_model):
    load, _, _ = fake_model
    folder = load()
    os.truncate(folder / "model.safetensors", 10)

    def full():
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(sources.ModelCacheError, match=rf"filled the disk.*free space.*{folder.parent}"):
        sources._rebuild(folder, full)


def test_a_built_model_folder_has_the_permissions_the_umask_allows(fake_model):
    load, _, _ = fake_model
    folder = load()
    umask = os.umask(0o022)
    os.umask(umask)
    assert (folder / "model.safetensors").stat().st_mode & 0o777 == 0o666 & ~umask
    assert folder.stat().st_mode & 0o777 == 0o777 & ~umask


def test_the_manifest_names_each_damaged_file(tmp_path):
    (tmp_path / "a").write_bytes(b"aaaa")
    (tmp_path / "b").write_bytes(b"bbbb")
    manifest = folder_manifest(tmp_path)
    (tmp_path / "b").write_bytes(b"bbbc")
    assert damaged_files(tmp_path, manifest, tmp_path.parent / "stamp.json") == ["b"]


@pytest.mark.slow
def test_zeroed_bytes_in_the_embedded_models_cache_rebuild_it_with_the_same_logits(smollm2, capfd):
    """The issue's case: 8 MB of zeros written into the cached model.safetensors."""
    import lotlib

    ids = torch.tensor([[1, 2, 3, 4, 5]])
    before = smollm2.hf(ids).logits
    folder = sources.model_source("smollm2-135m").path
    with open(folder / "model.safetensors", "r+b") as f:
        f.seek(1 << 20)
        f.write(bytes(8 << 20))
    after = lotlib.load_model("smollm2-135m", device="cpu").hf(ids).logits
    assert torch.equal(before, after)
    assert "rebuilding it from its source" in capfd.readouterr().err


def test_a_model_folder_without_config_fails_naming_it_and_writes_nothing(tmp_path):
    folder = tmp_path / "weights-only"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"")
    before = set(Path(os.environ["LOTLIB_CACHE_DIR"]).rglob("*"))
    with pytest.raises(sources.ModelNotFoundError, match=rf"{folder} has no config.json.*save_pretrained"):
        sources.model_source(str(folder))
    assert set(Path(os.environ["LOTLIB_CACHE_DIR"]).rglob("*")) == before


def _concurrent_builder(cache: Path, log: Path) -> str:
    return textwrap.dedent(f"""
        import os, sys, time
        from pathlib import Path
        from lotlib.models import sources
        from lotlib.storage.locks import file_lock
        folder = Path({str(cache)!r}) / "models" / "fake-0123"
        def build():
            with open({str(log)!r}, "a") as f:
                f.write(f"{{os.getpid()}}\\n")
            built = folder.parent / f".tmp-{{os.getpid()}}"
            built.mkdir(parents=True)
            time.sleep(1.0)
            (built / "model.safetensors").write_bytes(b"w" * 100000)
            sources._finish(built, folder, {{"name": "fake"}})
        if not sources.built_intact(folder):
            with file_lock(folder.with_name(folder.name + ".lock")):
                if not sources.built_intact(folder):
                    sources._rebuild(folder, build)
        print((folder / "model.safetensors").stat().st_size)
    """)


def test_two_processes_building_the_same_model_cache_build_it_once(tmp_path):
    log, code = tmp_path / "builds.log", _concurrent_builder(tmp_path / "cache", tmp_path / "builds.log")
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=120)[0].strip() for p in procs]
    assert [p.returncode for p in procs] == [0, 0] and outs == ["100000", "100000"]
    assert len(log.read_text().split()) == 1


# ---- the trajectory cache: no NaN shard ----

def test_states_with_nan_are_refused_naming_the_layers():
    X = np.zeros((4, 6, 3), dtype=np.float32)
    X[2, 4, 1] = np.nan
    with pytest.raises(NonFiniteTrajectories, match=r"model m: NaN or Inf in the states of layers \[4\].*1 of 4"):
        finite(X, "model m")
    assert finite(X[:2], "model m") is not None


def test_a_shard_holding_nan_is_never_used(tmp_path):
    """A shard written by damaged weights before this check existed (its sha256 matches its bytes)."""
    import hashlib

    X = np.ones((2, 3, 4), dtype=np.float32)
    X[0, 1, 2] = np.inf
    buffer = io.BytesIO()
    np.save(buffer, X)
    payload = buffer.getvalue()
    (tmp_path / f"shard-ids-{hashlib.sha256(payload).hexdigest()}.npy").write_bytes(payload)
    shard, bad = _find(tmp_path, "ids")
    assert shard is None and [reason for _, reason in bad] == ["holds NaN or Inf"]


@pytest.mark.slow
def test_weights_that_give_nan_cache_no_shard(tiny_gpt2_dir, tmp_path):
    import lotlib
    from lotlib.models.corpus import gibberish
    from lotlib.models.trajectories import trajectories

    model = lotlib.load_model(str(tiny_gpt2_dir), device="cpu")
    with torch.no_grad():
        next(model.hf.parameters()).fill_(float("nan"))
    text = gibberish(len(model.tokenizer), n_s=4, n_k=5, seed=0)
    shards = Path(os.environ["LOTLIB_CACHE_DIR"], "trajectories")
    before = set(shards.rglob("shard-*.npy"))
    with pytest.raises(NonFiniteTrajectories, match=r"model .*: NaN or Inf in the states of layers"):
        trajectories(model, text, progress=False)
    assert set(shards.rglob("shard-*.npy")) == before


# ---- files: temp + rename, a full disk, a kill between write and rename ----

def test_a_full_disk_names_the_path_and_leaves_the_old_file(tmp_path):
    target = tmp_path / "summary.json"
    target.write_text("old")

    def full(tmp: Path):
        tmp.write_text("half")
        raise OSError(errno.ENOSPC, "No space left on device")

    from lotlib.storage.atomic import write_atomic

    with pytest.raises(NotWritableError, match=rf"cannot write {target} .*free space on the disk"):
        write_atomic(target, full)
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["summary.json"]


def test_a_kill_between_write_and_rename_leaves_the_old_file(tmp_path):
    target = tmp_path / "results.csv"
    write_text_atomic(target, "old\n")
    code = textwrap.dedent(f"""
        import os, signal
        from lotlib.storage.atomic import write_atomic
        def killed(tmp):
            tmp.write_text("new but never renamed")
            os.kill(os.getpid(), signal.SIGKILL)
        write_atomic({str(target)!r}, killed)
    """)
    run = subprocess.run([sys.executable, "-c", code])
    assert run.returncode == -signal.SIGKILL and target.read_text() == "old\n"


# ---- arguments: checked before slow work, naming the parameter ----

def _fails_fast(argv: list[str], capsys, *names: str) -> str:
    start = time.perf_counter()
    assert main(argv) == 2
    assert time.perf_counter() - start < SECONDS
    err = capsys.readouterr().err
    for name in names:
        assert name in err
    return err


def test_n_boot_below_one_is_refused_before_the_run(capsys, tmp_path):
    err = _fails_fast(["run", "b4_residuals", "--quick", "-p", "n_boot", "0", "--out", str(tmp_path / "r.ipynb")],
                      capsys, "n_boot", "at least 1")
    assert not (tmp_path / "r.ipynb").exists(), err


def test_every_count_parameter_of_the_book_is_declared_a_count():
    counts = {"n_boot", "n_rep", "n_seeds", "n_splits", "n_reinit", "n_samples", "n_starts", "n_boot_splits",
              "n_boot_kurtosis"}
    loose = [f"{p.name}: {name}" for p in sorted((ROOT / "notebooks").glob("*.py"))
             for name, parameter in read_spec(p).parameters.items()
             if name in counts and parameter.text != "Count"]
    assert not loose, loose


def test_out_pointing_at_a_folder_is_refused_before_the_run(capsys, tmp_path):
    _fails_fast(["run", "b1_lines_of_thought", "--quick", "--out", str(tmp_path)], capsys, "--out", ".ipynb")
    assert list(tmp_path.iterdir()) == []


def test_out_of_a_sweep_or_book_pointing_at_a_file_is_refused(capsys, tmp_path):
    file = tmp_path / "results"
    file.write_text("mine")
    _fails_fast(["sweep", "b1_lines_of_thought", "--quick", "-p", "n_k", "8,9", "--out", str(file)], capsys,
                "--out", "is a file")
    _fails_fast(["book", "--quick", "--out", str(file)], capsys, "--out", "is a file")
    assert file.read_text() == "mine"


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA GPU")
def test_a_device_that_is_not_there_is_refused_once_before_any_kernel(capsys, tmp_path):
    _fails_fast(["run", "b1_lines_of_thought", "--quick", "--device", "cuda", "--out", str(tmp_path / "r.ipynb")],
                capsys, "--device cuda", "no CUDA GPU")
    _fails_fast(["sweep", "b1_lines_of_thought", "--quick", "--device", "cuda", "-p", "n_k", "8,9",
                 "--out", str(tmp_path / "s")], capsys, "--device cuda")
    assert not (tmp_path / "s").exists()


def test_a_sweep_value_given_twice_is_refused(capsys, tmp_path):
    _fails_fast(["sweep", "b1_lines_of_thought", "--quick", "-p", "n_k", "8,8,9", "--out", str(tmp_path / "s")],
                capsys, "n_k", "8", "more than once")
    spec = read_spec(ROOT / "notebooks" / "b1_lines_of_thought.py")
    with pytest.raises(SweepError, match="given more than once"):
        validate_grid(spec, {"n_k": [8, 8]})


def test_revision_is_refused_where_it_means_nothing(capsys, tmp_path):
    err = _fails_fast(["run", "b1_lines_of_thought", "--model", "smollm2-135m", "--revision", "v1",
                       "--out", str(tmp_path / "r.ipynb")], capsys, "--revision v1", "not a hub id")
    assert "drop --revision" in err
    _fails_fast(["book", "--revision", "v1"], capsys, "--revision v1 needs --model")


# ---- an interrupted sweep leaves its table ----

SLOW_NOTEBOOK = '''# %% tags=["parameters"]
n = 1

# %%
import time
from lotlib.summary import record
time.sleep(30)
record({"value": n})
'''


def test_a_sweep_interrupted_while_it_plans_its_runs_leaves_results_csv(tmp_path, monkeypatch):
    """The issue's case: a TERM (raised as KeyboardInterrupt by the command line) in the first seconds of a
    rerun, while the sweep checks which runs are finished."""
    from lotlib.book import sweep

    notebook = tmp_path / "slow.py"
    notebook.write_text(SLOW_NOTEBOOK)

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(sweep, "_finished", interrupted)
    with pytest.raises(KeyboardInterrupt):
        sweep.run_sweep(notebook, {"n": [1, 2]}, tmp_path / "sweep", progress=False)
    table = (tmp_path / "sweep" / "results.csv").read_text().splitlines()
    assert len(table) == 3 and all(",ok," not in row for row in table[1:]), table


def test_a_sweep_terminated_while_it_runs_leaves_results_csv(tmp_path):
    notebook = tmp_path / "slow.py"
    notebook.write_text(SLOW_NOTEBOOK)
    out = tmp_path / "sweep"
    sweep = subprocess.Popen([sys.executable, "-m", "lotlib.cli", "sweep", str(notebook), "-p", "n", "1,2",
                              "--out", str(out), "--workers", "1"], stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while not (out / "runs").exists() and time.time() < deadline:
        time.sleep(0.2)
    sweep.send_signal(signal.SIGTERM)
    err = sweep.communicate(timeout=120)[1]
    assert sweep.returncode == 130, err
    table = (out / "results.csv").read_text().splitlines()
    assert len(table) == 3 and all(",ok," not in row for row in table[1:]), table

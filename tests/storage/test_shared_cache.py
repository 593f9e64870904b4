"""A cache shared by a lab: files created with the umask's permissions, a populated cache read without write
access (locks are taken only to write), and one clear line when a read-only cache lacks an entry."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lotlib.storage.atomic import write_text_atomic
from lotlib.storage.paths import NotWritableError, cache_root, not_writable

CHAPTER = '''# %% tags=["parameters"]
n_s: int = 4  # pseudo-sentences

# %%
import lotlib
from lotlib.summary import record

lm, corpus, X = lotlib.walden_trajectories("smollm2-135m", n_k=8, n_s=n_s, device="cpu")
record({"shape": list(X.shape), "total": float(X.astype("float64").sum())})
'''


def test_files_take_the_umask_permissions(tmp_path):
    for umask, mode in ((0o022, 0o644), (0o027, 0o640), (0o077, 0o600)):
        before = os.umask(umask)
        try:
            path = write_text_atomic(tmp_path / f"f{umask:o}.txt", "x")
        finally:
            os.umask(before)
        assert path.stat().st_mode & 0o777 == mode
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary file left


def test_a_write_that_cannot_start_is_one_line_naming_the_cache_variable(tmp_path):
    blocker = cache_root() / "a-file"
    blocker.write_text("")
    with pytest.raises(NotWritableError, match=r"cannot write .*a-file/x \(.*\): the lotlib cache .* LOTLIB_CACHE_DIR"):
        write_text_atomic(blocker / "x", "y")
    outside = not_writable(tmp_path / "x", OSError(30, "Read-only file system"))
    assert str(outside) == f"cannot write {tmp_path / 'x'} (Read-only file system)"


@pytest.mark.slow
def test_the_model_folder_is_read_without_its_lock(smollm2, monkeypatch):
    from lotlib.models import sources

    def no_lock(path):
        raise not_writable(path, OSError(30, "Read-only file system"))

    monkeypatch.setattr(sources, "file_lock", no_lock)
    folder, _ = sources.embedded_folder("smollm2-135m")  # de-quantized already: no lock needed
    assert (folder / "lotlib.json").exists()


def _read_only_mounts() -> bool:
    if shutil.which("unshare") is None or os.geteuid() != 0:
        return False
    return subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode == 0


def _in_read_only_cache(command: list[str]) -> subprocess.CompletedProcess:
    """`command` in a private mount namespace where the cache is a read-only bind mount of itself (chmod
    does not stop root; a read-only mount does). A cache that lacks an entry there fails with one line: see
    `test_a_cache_that_cannot_be_locked_serves_what_it_holds` (tests/models/test_trajectories.py)."""
    script = 'mount --bind -o ro "$0" "$0" && ! touch "$0/probe" 2>/dev/null && exec "$@"'
    return subprocess.run(["unshare", "-m", "sh", "-c", script, str(cache_root()), *command],
                          capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_a_read_only_cache_serves_a_cached_chapter(smollm2, tmp_path):
    if not _read_only_mounts():
        pytest.skip("needs root and unshare -m to mount the cache read-only (chmod does not stop root)")
    import lotlib

    _, _, X = lotlib.walden_trajectories("smollm2-135m", n_k=8, n_s=4, device="cpu")  # populate the cache
    source = tmp_path / "cached.py"
    source.write_text(CHAPTER)
    lotlib_cli = str(Path(sys.executable).with_name("lotlib"))
    done = _in_read_only_cache([lotlib_cli, "run", str(source), "--out", str(tmp_path / "cached.ipynb")])
    assert done.returncode == 0, done.stderr[-3000:]
    values = json.loads((tmp_path / "cached.summary.json").read_text())["values"]
    assert values == {"shape": list(X.shape), "total": float(X.astype("float64").sum())}

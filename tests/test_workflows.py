"""The GitHub workflows: actionlint and zizmor (offline) find nothing in them, they name each action by one
major version, grant write access job by job, and run the README's commands on the supported Pythons."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((ROOT / ".github/workflows").glob("*.yml"))
# GitHub's own actions and PyPA's publisher by their major version's ref, as their READMEs advise.
ZIZMOR_CONFIG = """\
rules:
  unpinned-uses:
    config:
      policies:
        actions/*: ref-pin
        pypa/gh-action-pypi-publish: ref-pin
"""


def _command(name: str) -> str | None:
    """The command installed beside this interpreter (by the test extra), else the one on PATH."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else shutil.which(name)


def _required(name: str) -> str:
    """The command `name`, or a failure saying where it comes from."""
    command = _command(name)
    assert command, f"{name} is not installed: it comes with the test extra (pip install -e '.[test]')"
    return command


def _load(name: str) -> dict:
    """One workflow, parsed."""
    return yaml.safe_load((ROOT / ".github/workflows" / name).read_text())


def _runs(job: dict) -> str:
    """Every `run:` script of a job, one after the other."""
    return "\n".join(step.get("run", "") for step in job["steps"])


def test_actionlint_finds_nothing_in_the_workflows():
    """actionlint, shellcheck included on the `run:` scripts where shellcheck is installed."""
    lint = [_required("actionlint"), "-no-color", f"-shellcheck={_command('shellcheck') or ''}"]
    run = subprocess.run([*lint, *map(str, WORKFLOWS)], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


def test_zizmor_finds_nothing_in_the_workflows(tmp_path):
    config = tmp_path / "zizmor.yml"
    config.write_text(ZIZMOR_CONFIG)
    audit = [_required("zizmor"), "--offline", "--persona=regular", "--config", str(config)]
    run = subprocess.run([*audit, ".github/workflows"], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


def test_each_action_is_named_by_one_major_version_everywhere():
    uses = [s["uses"] for path in WORKFLOWS for job in _load(path.name)["jobs"].values()
            for s in job["steps"] if "uses" in s]
    refs: dict[str, set[str]] = {}
    for use in uses:
        action, ref = use.split("@")
        refs.setdefault(action, set()).add(ref)
    assert all(re.fullmatch(r"(release/)?v\d+", ref) for ref in set().union(*refs.values())), refs
    assert all(len(r) == 1 for r in refs.values()), f"one version per action: {refs}"


def test_every_job_has_a_timeout_and_asks_for_write_access_itself():
    for path in WORKFLOWS:
        workflow = _load(path.name)
        assert workflow["permissions"] == {"contents": "read"}, path.name
        for name, job in workflow["jobs"].items():
            assert job.get("timeout-minutes"), f"{path.name}: job {name} has no timeout"


def test_the_test_workflow_runs_the_readmes_command_on_the_supported_pythons():
    job = _load("test.yml")["jobs"]["test"]
    suites = {row["python"]: row["suite"] for row in job["strategy"]["matrix"]["include"]}
    assert suites == {"3.11": "whole", "3.13": "whole", "3.14": "fast"}
    supported = re.search(r"^SUPPORTED\s*:=(.*)$", (ROOT / "Makefile").read_text(), re.M)[1].split()
    assert set(suites) <= set(supported)
    assert "make test PYTHON=python" in _runs(job) and ".venv/bin/python -m pytest -q" in _runs(job)


def test_the_notebooks_job_force_pushes_the_quick_notebooks_to_their_branch():
    jobs = _load("pages.yml")["jobs"]
    writers = [name for name, job in jobs.items() if job.get("permissions", {}).get("contents") == "write"]
    assert writers == ["notebooks"]
    script = _runs(jobs["notebooks"])
    assert re.search(r"lotlib notebooks \S+ --quick", script)
    assert "git add --force notebooks/*.ipynb" in script and "git push --force origin notebooks" in script
    assert "*.ipynb" in (ROOT / ".gitignore").read_text().splitlines()

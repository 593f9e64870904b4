"""The wheel carries the book: built from the clone (and again from its sdist, file for file the same), installed
(not editable) in a fresh virtual environment, it copies the chapters out and runs one from an empty folder
outside the clone."""
import hashlib
import os
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest

from lotlib.book.build import parameter_section

from .conftest import ROOT

pytestmark = pytest.mark.slow  # a wheel built and installed, a chapter executed


def _build(kind: str, source: Path, out: Path) -> Path:
    """The PEP 517 `build_{kind}` hook of setuptools run in `source` (the environment's setuptools: no
    download); returns the file it wrote into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    code = f"from setuptools import build_meta; print(build_meta.build_{kind}({str(out)!r}))"
    name = subprocess.run([sys.executable, "-c", code], cwd=source, check=True, capture_output=True,
                          text=True).stdout.strip().splitlines()[-1]
    return out / name


def _contents(wheel: Path) -> dict[str, str]:
    """Each file of a wheel with the sha256 of its bytes (the RECORD, which lists them, left out)."""
    with zipfile.ZipFile(wheel) as z:
        return {n: hashlib.sha256(z.read(n)).hexdigest() for n in z.namelist() if not n.endswith("RECORD")}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    return _build("wheel", ROOT, tmp_path_factory.mktemp("dist"))


def test_the_sdist_builds_the_same_wheel(wheel, tmp_path):
    sdist = _build("sdist", ROOT, tmp_path / "sdist")
    with tarfile.open(sdist) as tar:
        tar.extractall(tmp_path / "unpacked", filter="data")
    again = _build("wheel", next((tmp_path / "unpacked").iterdir()), tmp_path / "again")
    assert _contents(again) == _contents(wheel)


def test_the_wheel_holds_the_chapters_the_claims_and_the_book_configuration(wheel):
    names = set(_contents(wheel))
    for source in [*(ROOT / "notebooks").glob("*.py"), *(ROOT / "book").rglob("*.*")]:
        if "__pycache__" in source.parts:
            continue
        relative = source.relative_to(ROOT)
        assert f"lotlib/project/{relative}" in names, relative
    assert "lotlib/project/requirements-models.txt" in names
    assert not [n for n in names if n.startswith(("tests/", "benchmarks/", "notebooks/", "book/"))]


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Path:
    """A fresh virtual environment with the wheel installed in it; the dependencies it needs are this
    environment's, reached through a .pth line (which does not bring this environment's editable lotlib)."""
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    (Path(site) / "lotlib-test-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], check=True)
    return venv


def _lotlib(venv: Path, folder: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{venv / 'bin'}:{os.environ['PATH']}"}
    env.pop("LOTLIB_PROJECT", None)
    return subprocess.run([venv / "bin" / "lotlib", *args], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=900)


def test_the_installed_wheel_runs_a_chapter_from_an_empty_folder(installed, tmp_path):
    where = subprocess.run([installed / "bin" / "python", "-c", "import lotlib; print(lotlib.__file__)"],
                           cwd=tmp_path, check=True, capture_output=True, text=True).stdout
    assert where.startswith(str(installed)), where
    small = parameter_section(ROOT, "tests")["b1_lines_of_thought"]
    overrides = [arg for name, value in small.items() for arg in ("-p", name, str(value))]
    result = _lotlib(installed, tmp_path, "run", "b1_lines_of_thought", "--quick", *overrides)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "build" / "runs" / "b1_lines_of_thought.ipynb").is_file()


def test_the_installed_wheel_copies_the_chapters_out(installed, tmp_path):
    result = _lotlib(installed, tmp_path, "notebooks", "chapters", "--quick")
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in (tmp_path / "chapters" / "notebooks").glob("*.py")) == sorted(
        p.name for p in (ROOT / "notebooks").glob("*.py"))
    assert (tmp_path / "chapters" / "notebooks" / "b1_lines_of_thought.ipynb").is_file()

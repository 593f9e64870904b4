"""Sweeps: grid parsing and validation, parallel runs, failures recorded, resume, Dask on loopback."""
import json

import pandas as pd
import pytest

from lotlib.cli import main
from lotlib.book.sweep import SweepError, expand, load_grid, parse_values, run_sweep, validate_grid

NOTEBOOK = '''# %% tags=["parameters"]
n = 1
scale = 0.5
label = "a"

# %%
from lotlib.book.summary import record

if n == 2 and label == "fail":
    raise RuntimeError("run asked to fail")
record({"value": n * scale})
'''


@pytest.fixture
def notebook(tmp_path):
    path = tmp_path / "chapter.py"
    path.write_text(NOTEBOOK)
    return path


def test_grid_parsing(tmp_path):
    assert parse_values("1, 2.5,true,null,text") == [1, 2.5, True, None, "text"]
    grid_file = tmp_path / "grid.yml"
    grid_file.write_text("n: [1, 2]\nlabel: b\n")
    grid = load_grid([("n", "3,4")], grid_file)
    assert grid == {"n": [3, 4], "label": ["b"]}
    assert expand({"a": [1, 2], "b": ["x", "y"]}) == [{"a": 1, "b": "x"}, {"a": 1, "b": "y"},
                                                      {"a": 2, "b": "x"}, {"a": 2, "b": "y"}]


def test_bad_grids_fail_before_anything_runs(notebook):
    with pytest.raises(SweepError, match="empty grid"):
        validate_grid(notebook, {})
    with pytest.raises(SweepError, match="empty grid"):
        validate_grid(notebook, {"n": []})
    with pytest.raises(SweepError, match=r"no parameter nn; it takes: n \(default 1\), scale"):
        validate_grid(notebook, {"nn": [1]})
    with pytest.raises(SweepError, match="chapter.py: parameter n expects int; got 'two'"):
        validate_grid(notebook, {"n": [1, "two"]})
    validate_grid(notebook, {"scale": [1, 0.25], "label": ["x"]})  # ints are fine for a float


def test_parallel_sweep_records_failures_and_resumes(notebook, tmp_path):
    out = tmp_path / "sweep"
    table = run_sweep(notebook, {"n": [1, 2, 3], "label": ["fail"]}, out, workers=2, progress=False)
    by_n = table.set_index("n")
    assert list(by_n["status"]) == ["ok", "failed", "ok"]
    assert "run asked to fail" in by_n.loc[2, "error"]
    assert by_n.loc[3, "value"] == 1.5
    saved = pd.read_csv(out / "results.csv")
    assert len(saved) == 3 and set(saved.columns) >= {"n", "label", "status", "value"}
    ok_run = out / "runs" / by_n.loc[1, "run"] / "status.json"
    stamp = ok_run.stat().st_mtime_ns
    again = run_sweep(notebook, {"n": [1, 2, 3], "label": ["fail"]}, out, workers=2, progress=False)
    assert ok_run.stat().st_mtime_ns == stamp  # finished runs are not run again
    assert list(again.set_index("n")["status"]) == ["ok", "failed", "ok"]


def test_sweep_on_a_local_dask_cluster(notebook, tmp_path):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None) as cluster:
        table = run_sweep(notebook, {"scale": [2.0, 3.0]}, tmp_path / "dask", scheduler=cluster.scheduler_address,
                          progress=False)
    assert list(table["status"]) == ["ok", "ok"] and list(table["value"]) == [2.0, 3.0]


def test_cli_sweep_with_plot(notebook, tmp_path, capsys):
    out = tmp_path / "cli"
    assert main(["sweep", str(notebook), "-p", "n", "1,2", "-p", "scale", "0.5,1", "--out", str(out),
                 "--workers", "2", "--plot", "value", "--hue", "scale"]) == 0
    assert (out / "summary.png").stat().st_size > 1000
    assert "4 runs" in capsys.readouterr().out
    assert main(["sweep", str(notebook), "-p", "bogus", "1", "--out", str(out)]) == 2
    assert "it takes: n" in capsys.readouterr().err
    statuses = [json.loads(p.read_text())["status"] for p in (out / "runs").glob("*/status.json")]
    assert statuses == ["ok"] * 4

"""Sweeps: grid parsing and validation, parallel runs, failures (a killed worker included) recorded, resume,
each run's summary its own (threads of one process, a Dask cluster of multi-thread workers)."""
import json
import threading

import pandas as pd
import pytest

from lotlib.book.spec import read_spec
from lotlib.book.sweep import (
    SweepError,
    expand,
    load_grid,
    parse_values,
    run_sweep,
    validate_grid,
)
from lotlib.book.workers import Run, execute
from lotlib.cli import main

from ..conftest import ROOT

NOTEBOOK = '''# %% tags=["parameters"]
n = 1
scale = 0.5
label = "a"

# %%
import os
import signal

import psutil
from lotlib.summary import record

if n == 2 and label == "fail":
    raise RuntimeError("run asked to fail")
if n == 3 and label == "fail":  # the process driving this run dies (a killed worker), not the kernel zygote
    driver = next(p for p in psutil.Process().parents() if not p.cmdline()[-1].endswith("zygote.py"))
    os.kill(driver.pid, signal.SIGKILL)
record({"value": n * scale, "ran_n": n, "ran_scale": scale})
'''


@pytest.fixture
def notebook(tmp_path):
    path = tmp_path / "chapter.py"
    path.write_text(NOTEBOOK)
    return path


def _own_parameters(table: pd.DataFrame) -> bool:
    """Every row holds the values its own run recorded."""
    return all((table["ran_n"] == table["n"]) & (table["ran_scale"] == table["scale"]))


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
        validate_grid(read_spec(notebook), {})
    with pytest.raises(SweepError, match="empty grid"):
        validate_grid(read_spec(notebook), {"n": []})
    with pytest.raises(SweepError, match=r"no parameter nn; it takes: n \(default 1\), scale"):
        validate_grid(read_spec(notebook), {"nn": [1]})
    with pytest.raises(SweepError, match="chapter.py: parameter n expects int; got 'two'"):
        validate_grid(read_spec(notebook), {"n": [1, "two"]})
    validate_grid(read_spec(notebook), {"scale": [1, 0.25], "label": ["x"]})  # ints are fine for a float
    with pytest.raises(SweepError, match="parameter n_s expects Pilots"):  # a default of None has a declared type
        validate_grid(read_spec(ROOT / "notebooks" / "b1_lines_of_thought.py"), {"n_s": ["abc"]})


@pytest.mark.slow
def test_failed_and_killed_runs_are_recorded_and_the_others_go_on(notebook, tmp_path):
    out = tmp_path / "sweep"
    grid = {"n": [1, 2, 3], "label": ["fail"]}
    table = run_sweep(notebook, grid, out, workers=2, progress=False)
    by_n = table.set_index("n")
    assert list(by_n["status"]) == ["ok", "failed", "failed"]
    assert "run asked to fail" in by_n.loc[2, "error"]
    assert "killed by SIGKILL" in by_n.loc[3, "error"]
    assert by_n.loc[1, "value"] == 0.5 and pd.isna(by_n.loc[3, "value"])
    saved = pd.read_csv(out / "results.csv")
    assert list(saved["status"]) == ["ok", "failed", "failed"] and saved.loc[0, "value"] == 0.5
    leftovers = [p.name for p in (out / "runs").rglob("*") if p.name.endswith((".input.ipynb", ".partial.ipynb"))]
    assert leftovers == []  # the dead run's staged and partial notebooks are gone
    ok_run = out / "runs" / by_n.loc[1, "run"] / "status.json"
    stamp = ok_run.stat().st_mtime_ns
    again = run_sweep(notebook, grid, out, workers=2, progress=False)
    assert ok_run.stat().st_mtime_ns == stamp  # finished runs are not run again; failed ones are
    assert list(again.set_index("n")["status"]) == ["ok", "failed", "failed"]


@pytest.mark.slow
def test_runs_in_threads_of_one_process_keep_their_own_summaries(notebook, tmp_path):
    runs = [{"n": n, "scale": 0.5, "label": "a"} for n in (1, 4, 5, 6)]
    statuses = {}

    def one(parameters):
        output = tmp_path / f"run{parameters['n']}" / "chapter.ipynb"
        statuses[parameters["n"]] = execute(Run(str(parameters["n"]), str(notebook), str(output), parameters))

    threads = [threading.Thread(target=one, args=(p,)) for p in runs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert {n: s["status"] for n, s in statuses.items()} == {1: "ok", 4: "ok", 5: "ok", 6: "ok"}
    for p in runs:
        summary = json.loads((tmp_path / f"run{p['n']}" / "chapter.summary.json").read_text())
        assert summary["values"]["ran_n"] == p["n"] and summary["parameters"]["n"] == p["n"]


@pytest.mark.slow
def test_dask_sweep_on_multi_thread_workers_equals_the_serial_sweep(notebook, tmp_path, capsys):
    distributed = pytest.importorskip("distributed")
    serial = tmp_path / "serial"
    assert main(["sweep", str(notebook), "-p", "n", "1,4", "-p", "scale", "0.5,1", "--out", str(serial),
                 "--workers", "1", "--plot", "value", "--hue", "scale"]) == 0
    assert (serial / "summary.png").stat().st_size > 1000
    assert "4 runs" in capsys.readouterr().out
    with distributed.LocalCluster(n_workers=2, threads_per_worker=2, processes=True, host="127.0.0.1",
                                  dashboard_address=None) as cluster:
        assert main(["sweep", str(notebook), "-p", "n", "1,4", "-p", "scale", "0.5,1", "--out", str(tmp_path / "dask"),
                     "--scheduler", cluster.scheduler_address]) == 0
    expected, table = pd.read_csv(serial / "results.csv"), pd.read_csv(tmp_path / "dask" / "results.csv")
    pd.testing.assert_frame_equal(table, expected)  # row by row: parameters, status and every value
    assert list(table["status"]) == ["ok"] * 4 and _own_parameters(table)
    assert main(["sweep", str(notebook), "-p", "bogus", "1", "--out", str(serial)]) == 2
    assert "it takes: n" in capsys.readouterr().err


@pytest.mark.slow
def test_a_dask_task_whose_worker_dies_is_a_failed_run(notebook, tmp_path):
    distributed = pytest.importorskip("distributed")
    import dask

    with dask.config.set({"distributed.scheduler.allowed-failures": 0}), \
            distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                     dashboard_address=None) as cluster:
        table = run_sweep(notebook, {"n": [1, 3], "label": ["fail"]}, tmp_path / "dask",
                          scheduler=cluster.scheduler_address, progress=False)
    by_n = table.set_index("n")
    assert by_n.loc[1, "status"] == "ok" and by_n.loc[1, "value"] == 0.5
    assert by_n.loc[3, "status"] == "failed" and "KilledWorker" in by_n.loc[3, "error"]
    assert list(pd.read_csv(tmp_path / "dask" / "results.csv")["status"]) == ["ok", "failed"]


def test_estimates_become_value_and_interval_columns():
    from lotlib.book.sweep import _flat
    from lotlib.stats import Estimate

    flat = _flat({"k90": Estimate(0.2, 0.1, 0.3, 50, "pilots").to_json(), "n_s": 40})
    assert flat == {"k90": 0.2, "k90_lo": 0.1, "k90_hi": 0.3, "n_s": 40}


def test_a_sweep_page_records_its_runs_and_the_means_by_x():
    from lotlib.book.sweep import sweep_summary
    from lotlib.stats import Estimate

    table = pd.DataFrame({"status": ["ok", "ok", "ok", "failed"], "n_k": [10, 10, 50, 50],
                          "y": [Estimate(1.0, 0.9, 1.1, 8, "s").to_json(), 3.0, 5.0, None]})
    values, text = sweep_summary(table, "n_k", "y")
    assert values == {"runs": 4, "runs_ok": 3, "runs_failed": 1, "y_at_n_k_10": 2.0, "y_at_n_k_50": 5.0}
    assert text.startswith("10: 2 ± 1.4, 50: 5 ± ")  # the failed run is left out; one run has no spread

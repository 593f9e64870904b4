"""The refactor check: two builds' summaries compared leaf by leaf."""
import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("compare_summaries", ROOT / "benchmarks" / "compare_summaries.py")
compare_summaries = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compare_summaries)


def _write(folder: Path, values: dict) -> None:
    (folder / "notebooks").mkdir(parents=True)
    (folder / "notebooks" / "b1.summary.json").write_text(json.dumps({"key": str(folder), "values": values}))


def test_equal_values_pass_and_a_moved_interval_bound_is_named(tmp_path):
    estimate = {"value": 0.75, "lo": 0.74, "hi": 0.76, "n": 288}
    _write(tmp_path / "a", {"share": estimate, "by_layer": [0.1, 0.2], "name": "x"})
    _write(tmp_path / "b", {"share": dict(estimate), "by_layer": [0.1, 0.2 + 1e-12], "name": "x"})
    compared, problems = compare_summaries.compare(tmp_path / "a", tmp_path / "b", 1e-9, 1e-12)
    assert (compared, problems) == (7, [])
    _write(tmp_path / "c", {"share": {**estimate, "hi": 0.77}, "by_layer": [0.1], "name": "x"})
    compared, problems = compare_summaries.compare(tmp_path / "a", tmp_path / "c", 1e-9, 1e-12)
    assert compared == 6
    assert problems == ["notebooks/b1.summary.json.by_layer[1]: removed",
                        "notebooks/b1.summary.json.share.hi: 0.76 -> 0.77"]

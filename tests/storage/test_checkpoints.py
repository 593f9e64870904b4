"""Resumable loops keep each finished step under $LOTLIB_CHECKPOINTS, and nothing without it."""
from lotlib.storage.checkpoints import CHECKPOINT_VARIABLE, Steps, resumable


def test_a_kept_step_is_read_back_and_an_unreadable_one_computed_again(tmp_path):
    steps, calls = Steps(tmp_path / "loop"), []
    assert steps(0, lambda: calls.append(0) or {"value": 1.5}) == {"value": 1.5}
    assert steps(0, lambda: calls.append(1) or {"value": 9.0}) == {"value": 1.5}  # read back, not computed
    (tmp_path / "loop" / "step-1.pkl").write_bytes(b"half a pick")
    assert steps(1, lambda: calls.append(2) or 7) == 7
    assert calls == [0, 2] and steps(1, lambda: 8) == 7


def test_loops_are_named_by_their_rank_and_keep_nothing_outside_a_run(tmp_path, monkeypatch):
    monkeypatch.delenv(CHECKPOINT_VARIABLE, raising=False)
    assert resumable("anything").folder is None
    monkeypatch.setenv(CHECKPOINT_VARIABLE, str(tmp_path))
    first, second = resumable("truncation resamples (bases refit)"), resumable("svm")
    assert first.folder.parent == second.folder.parent == tmp_path
    rank = int(first.folder.name[:3])
    assert first.folder.name == f"{rank:03d}-truncation_resamples_bases_refit_"
    assert second.folder.name == f"{rank + 1:03d}-svm"

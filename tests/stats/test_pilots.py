import numpy as np
import pytest

from lotlib.stats import draw_pilots, split_pilots, training_rows


def test_draw_pilots_are_distinct_sorted_and_seeded():
    pilots = draw_pilots(50, 20, np.random.default_rng(2))
    assert len(np.unique(pilots)) == 20 and np.all(np.diff(pilots) > 0)
    np.testing.assert_array_equal(draw_pilots(50, 20, np.random.default_rng(2)), pilots)
    np.testing.assert_array_equal(
        draw_pilots(5, 20, np.random.default_rng(0)), np.arange(5)
    )


def test_successive_draws_from_one_generator_continue_its_stream():
    rng = np.random.default_rng(2)
    a, b = draw_pilots(20, 5, rng), draw_pilots(20, 30, rng)
    check = np.random.default_rng(2)
    np.testing.assert_array_equal(a, np.sort(check.choice(20, 5, replace=False)))
    np.testing.assert_array_equal(b, np.sort(check.choice(20, 20, replace=False)))


def test_split_pilots_cuts_one_permutation_in_two_sorted_parts():
    first, rest = split_pilots(11, 4, np.random.default_rng(3))
    order = np.random.default_rng(3).permutation(11)
    np.testing.assert_array_equal(first, np.sort(order[:4]))
    np.testing.assert_array_equal(rest, np.sort(order[4:]))
    np.testing.assert_array_equal(np.sort(np.concatenate([first, rest])), np.arange(11))


def test_training_rows_keep_every_copy_of_a_pilot_on_one_side():
    drawn = np.array([0, 0, 1, 2, 2, 2, 3, 4])
    train = training_rows(drawn, np.random.default_rng(0), 0.5)
    for pilot in np.unique(drawn):
        assert len(set(train[drawn == pilot])) == 1
    assert 0 < train.sum() < len(drawn)
    with pytest.raises(ValueError, match="2 distinct pilots"):
        training_rows(np.array([3, 3]), np.random.default_rng(0))

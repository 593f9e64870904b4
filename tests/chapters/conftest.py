"""Fixtures the chapter tests share with the building-block tests."""

from tests.lines_of_thought.test_null_tests import tiny_llama  # noqa: F401
from tests.lines_of_thought.test_truncation import tiny  # noqa: F401
from tests.traveling_words.test_probes import queries  # noqa: F401

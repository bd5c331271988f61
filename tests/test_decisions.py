"""What the worker accepts from a policy as a count, and how it shows an answer in a
violation's detail (reference/worker/decisions.py), against values written out by hand."""
from __future__ import annotations

import numpy as np
import pytest

from reference.shapes import Admission, ChunkPlan, Transition
from reference.worker.decisions import is_count, shown


@pytest.mark.parametrize("value", [0, 1, 16, 2 ** 40 - 1])
def test_a_count_is_a_plain_int_from_zero_below_two_to_the_forty(value):
    assert is_count(value)


@pytest.mark.parametrize("value", [-1, 2 ** 40, 2 ** 64, True, False, 1.0, "1", None,
                                   np.int64(1), (1,)])
def test_anything_else_is_no_count(value):
    # A bool is an int to isinstance but no count; numpy's ints are not plain ints.
    assert not is_count(value)


@pytest.mark.parametrize("value,text", [
    (5, "5"),
    ("wait", "'wait'"),
    (None, "None"),
    ((), "()"),
    ((1,), "(1,)"),                                    # a one-item tuple keeps its comma
    ((1, "a"), "(1, 'a')"),
    ([], "[]"),
    ([1], "[1]"),                                      # a list has no trailing comma
    ([1, 2], "[1, 2]"),
    (tuple(range(8)), "(0, 1, 2, 3, 4, 5, 6, 7)"),     # eight items are printed
    (tuple(range(9)), "<a tuple of 9 items>"),         # nine are named by their size
    (list(range(9)), "<a list of 9 items>"),
    (((1,), [2]), "((1,), [2])"),                      # inside a tuple, each item shown alike
    (Admission("admit", 3), "Admission(decision='admit', reserve_pages=3, reason='')"),
    (ChunkPlan(64, "ok"), "ChunkPlan(tokens=64, verdict='ok')"),
    (Transition("done", ("release_pages",) * 100_000),
     "Transition(next_state='done', actions=<a tuple of 100000 items>)"),
    (Admission, repr(Admission)),                      # a dataclass itself is no answer's value
])
def test_an_answer_is_shown_as_written(value, text):
    assert shown(value) == text


def test_a_long_answer_is_cut_to_the_limit_with_an_ellipsis():
    fits = "x" * 118                                   # its repr, with the quotes, is 120
    assert shown(fits) == repr(fits)
    over = "x" * 119
    assert shown(over) == "'" + "x" * 116 + "..." and len(shown(over)) == 120
    assert shown("abcdef", limit=5) == "'a..."
    assert shown("abc", limit=5) == "'abc'"
    # The limit holds for what a dataclass and a tuple hold too.
    assert shown(Admission("admit", 3, "r" * 500)) == (
        "Admission(decision='admit', reserve_pages=3, reason='" + "r" * 64 + "...")   # 53 + 64 + 3
    assert len(shown(tuple("y" * 200 for _ in range(3)))) == 120

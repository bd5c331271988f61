"""grader.engine.validate: plain JSON from a submission -> trusted shapes, or a learner-actionable error."""
import re
from typing import Optional

import pytest

from grader.engine.validate import MAX_REASONS, InvalidValue, coerce, read_answer, within_domain
from reference.shapes import (ACTIONS, ChunkContext, ChunkPlan, CostModel, PageInfo, RequestRecord, RequestView,
                              ReleaseDecision, Slo, Transition, Verdict, WorkerSpec)


def message(value, expected):
    with pytest.raises(InvalidValue) as info:
        coerce(value, expected)
    return info.value.message


def test_dataclass_is_built_in_the_parent():
    got = coerce({"__type__": "Verdict", "ok": False, "reason": "over_pool"}, Verdict)
    assert got == Verdict(False, "over_pool") and type(got) is Verdict


def test_missing_field_with_default_is_fine_without_default_is_not():
    assert coerce({"__type__": "Verdict", "ok": True}, Verdict) == Verdict(True)
    assert message({"__type__": "Verdict", "reason": ""}, Verdict) == "Verdict: missing field 'ok'"


def test_unexpected_field_and_wrong_tag():
    assert "unexpected field 'okay'" in message({"__type__": "Verdict", "ok": True, "okay": 1}, Verdict)
    assert message({"__type__": "Slo", "ttft_s": 1, "gap_s": 1}, Verdict) == "returned Slo, expected Verdict"
    assert message({"ok": True}, Verdict) == "returned dict, expected Verdict"


def test_top_level_wrong_type():
    assert message(3, Verdict) == "returned int 3, expected Verdict"
    assert message(None, int) == "returned None, expected int"
    assert message([1], int) == "returned tuple or list [1], expected int"


def test_a_tuple_returned_for_a_dataclass_is_not_called_a_list():
    # The wire carries a tuple as a JSON list: `return (16, "ok")` read "returned list".
    assert message([16, "ok"], ChunkPlan) == "returned tuple or list [16, 'ok'], expected ChunkPlan"
    assert message({"__type__": "Transition", "next_state": ["done"]}, Transition) \
        == "Transition.next_state: expected str, got tuple or list ['done']"


def test_bool_is_not_int_and_int_is_not_bool():
    assert message(True, int) == "returned bool True, expected int"
    assert message(1, bool) == "returned int 1, expected bool"
    assert message({"__type__": "Verdict", "ok": "yes"}, Verdict) == "Verdict.ok: expected bool, got str 'yes'"
    assert message({"__type__": "Verdict", "ok": 1}, Verdict) == "Verdict.ok: expected bool, got int 1"
    assert message(False, float) == "returned bool False, expected float"


def test_int_allowed_for_float_and_becomes_float():
    got = coerce({"__type__": "Slo", "ttft_s": 2, "gap_s": 0.5}, Slo)
    assert got == Slo(2.0, 0.5) and type(got.ttft_s) is float


def test_floats_must_be_finite():
    for bad in (float("nan"), float("inf"), float("-inf")):
        assert "expected a finite float" in message(bad, float)
    assert message({"__type__": "Slo", "ttft_s": float("nan"), "gap_s": 1.0}, Slo) \
        == "Slo.ttft_s: expected a finite float, got nan"


def test_int_bounds():
    assert coerce(2 ** 62 - 1, int) == 2 ** 62 - 1
    assert coerce(-(2 ** 62) + 1, int) == -(2 ** 62) + 1
    assert "out of range" in message(2 ** 62, int)
    assert "out of range" in message(-(2 ** 62), float)
    # Everything beyond the bound, not only the bound itself (JSON integers have no limit).
    for huge in (2 ** 63, -(2 ** 64), 10 ** 400):
        for expected in (int, float):
            assert "out of range (|x| < 2**62)" in message(huge, expected)


def test_string_bounds():
    assert coerce("x" * 10_000, str) == "x" * 10_000
    assert "string too long (10001 characters" in message("x" * 10_001, str)
    assert "not valid text" in message("\ud800", str)       # a lone surrogate from a JSON escape
    assert message(5, str) == "returned int 5, expected str"


def test_tuples():
    assert coerce([1, 2, 3], tuple[int, ...]) == (1, 2, 3)
    assert coerce((), tuple[int, ...]) == ()
    assert "too many items (100001" in message([0] * 100_001, tuple[int, ...])
    assert message([1, "2"], tuple[int, ...]) == "returned value[1]: expected int, got str '2'"
    assert message("abc", tuple[int, ...]) == "returned str 'abc', expected tuple"
    assert coerce([1, "a"], tuple[int, str]) == (1, "a")
    # A fixed-length tuple takes exactly its length: more or fewer items are wrong answers.
    assert message([1, "a", 3], tuple[int, str]) == "returned value: expected 2 items, got 3"
    assert message([1], tuple[int, str]) == "returned value: expected 2 items, got 1"
    assert message([], tuple[int]) == "returned value: expected 1 items, got 0"
    got = coerce({"__type__": "Transition", "next_state": "done", "actions": ["release_pages"]}, Transition)
    assert got == Transition("done", ("release_pages",)) and type(got.actions) is tuple
    assert message({"__type__": "Transition", "next_state": "done", "actions": ["a", 5]}, Transition) \
        == "Transition.actions[1]: expected str, got int 5"


def test_optional_fields():
    base = {"__type__": "RequestRecord", "id": "r1", "scope": "s", "cls": "c",
            "slo": {"__type__": "Slo", "ttft_s": 1.0, "gap_s": 0.1}, "arrival_s": 0,
            "outcome": "completed", "prompt_tokens": 10, "max_new_tokens": 5, "tokens_out": 5,
            "token_times": [0.5, 0.6], "first_token_s": None, "finish_s": 1}
    rec = coerce(base, RequestRecord)
    assert rec.first_token_s is None and rec.finish_s == 1.0 and rec.token_times == (0.5, 0.6)
    assert rec.admitted_s is None and rec.slo == Slo(1.0, 0.1)
    assert message({**base, "finish_s": "1"}, RequestRecord) == \
        "RequestRecord.finish_s: expected float, got str '1'"
    assert coerce(None, Optional[int]) is None and coerce(4, Optional[int]) == 4


def test_nested_dataclasses():
    cost = {"__type__": "CostModel", "step_fixed": 0.004, "per_token": 4e-05,
            "per_context_token": 1e-07, "per_attention_pair": 2e-09}
    ctx = {"__type__": "ChunkContext", "gap_budget_s": 0.05, "cost": cost,
           "decode_contexts": [100, 200], "prefill_done": 0, "prefill_remaining": 512,
           "page_tokens": 16, "min_chunk_tokens": 16}
    got = coerce(ctx, ChunkContext)
    assert got.cost == CostModel() and got.decode_contexts == (100, 200)
    assert message({**ctx, "cost": {**cost, "__type__": "Slo"}}, ChunkContext) \
        == "ChunkContext.cost: expected CostModel, got Slo"
    assert message({**ctx, "cost": {**cost, "per_token": True}}, ChunkContext) \
        == "ChunkContext.cost.per_token: expected float, got bool True"
    # A default_factory field may be left out.
    spec = coerce({"__type__": "WorkerSpec", "device_bytes": 1, "reserved_bytes": 0,
                   "page_tokens": 16, "max_running": 4}, WorkerSpec)
    assert spec.cost == CostModel()
    view = coerce({"__type__": "RequestView", "id": "a", "scope": "s", "prompt_tokens": 1,
                   "max_new_tokens": 1, "slo": {"__type__": "Slo", "ttft_s": 1, "gap_s": 1}}, RequestView)
    assert view.cls == "default"


def test_invalid_value_is_a_value_error_and_unsupported_types_are_grader_bugs():
    assert issubclass(InvalidValue, ValueError)
    with pytest.raises(TypeError, match=r"^validate does not support list\[int\]$"):
        coerce([1], list[int])
    # Only tuple[X, ...] is variadic: an ellipsis elsewhere is no type validate can read.
    with pytest.raises(TypeError, match="^validate does not support Ellipsis$"):
        coerce([1, 2, "a"], tuple[int, ..., str])


def test_a_union_other_than_optional_is_a_grader_bug_not_a_guess():
    # Two non-None options would need a rule for which one the value meant: validate has
    # none, so such a return type is refused rather than read as its first option.
    for expected in (int | str, Optional[int | str]):
        with pytest.raises(TypeError, match=f"^validate does not support {re.escape(repr(expected))}$"):
            coerce(1, expected)
    assert coerce(None, int | None) is None and coerce(7, int | None) == 7
    assert message("7", int | None) == "returned str '7', expected int"


def test_the_item_limit_is_inclusive():
    assert coerce([0] * 100_000, tuple[int, ...]) == (0,) * 100_000
    assert message([0] * 100_001, tuple[int, ...]) == "returned value: too many items (100001, limit 100000)"


def test_any_unexpected_key_is_refused_whatever_it_sorts_like():
    # Keys sorting before and after the tag: none is dropped silently.
    for key in ("OK", "0", "_", "__a", "__type__x", "ok ", ""):
        assert message({"__type__": "Verdict", "ok": True, key: 1}, Verdict) \
            == f"Verdict: unexpected field {key!r} (Verdict has ok, reason)"


def test_unexpected_fields_are_named_first_in_sorted_order():
    # The same answer always gets the same message, whatever order its keys arrived in.
    for order in (("zz", "aa"), ("aa", "zz")):
        value = {"__type__": "Verdict", "ok": True, **{k: 1 for k in order}}
        assert message(value, Verdict) == "Verdict: unexpected field 'aa' (Verdict has ok, reason)"


def test_a_shown_value_is_at_most_40_characters():
    # A repr of 40 characters is shown whole; a longer one is cut to 37 and "...".
    fits, cut = "x" * 38, "x" * 39
    assert message(fits, int) == f"returned str {fits!r}, expected int"
    assert message(cut, int) == f"returned str '{'x' * 36}..., expected int"
    assert message(10 ** 39, str) == f"returned int {10 ** 39}, expected str"       # 40 digits
    assert message(10 ** 40, str) == f"returned int {str(10 ** 40)[:37]}..., expected str"
    # A tag naming no real class is shown the same way, without its quotes.
    assert message({"__type__": "T" * 38}, Verdict) == f"returned {'T' * 38}, expected Verdict"
    assert message({"__type__": "T" * 39}, Verdict) == f"returned {'T' * 36}..., expected Verdict"
    assert message({"__type__": 5}, Verdict) == "returned dict, expected Verdict"


def _transition(actions):
    return {"__type__": "Transition", "next_state": "done", "actions": actions}


def test_domain_bounds_are_inclusive_and_name_the_limit():
    # A transition takes every action the course defines once, and no more.
    within_domain("on_event", _transition(list(ACTIONS)), ())
    with pytest.raises(InvalidValue) as e:
        within_domain("on_event", _transition(list(ACTIONS) + ["notify_client"]), ())
    assert e.value.message.startswith(f"Transition.actions: {len(ACTIONS) + 1} actions; a transition "
                                      f"has at most the {len(ACTIONS)} the course defines")
    # publishable: at most one index per page offered, none when nothing was offered.
    offered = tuple(PageInfo(i, 16, 16, 16, False) for i in range(3))
    for answer in ([0, 1, 2], [2], []):          # as many as offered, or fewer
        within_domain("publishable", answer, (offered,))
        within_domain("publishable", answer, (list(offered),))
    for args, n in (((offered,), 3), ((), 0), ((None,), 0)):
        with pytest.raises(InvalidValue) as e:
            within_domain("publishable", [0] * (n + 1), args)
        assert e.value.message == f"returned value: {n + 1} page indices for {n} pages offered"
    # A release decision: up to MAX_REASONS reasons.
    decision = {"__type__": "ReleaseDecision", "decision": "release"}
    within_domain("decide_release", {**decision, "reasons": ["r"] * MAX_REASONS}, ())
    with pytest.raises(InvalidValue) as e:
        within_domain("decide_release", {**decision, "reasons": ["r"] * (MAX_REASONS + 1)}, ())
    assert e.value.message == f"ReleaseDecision.reasons: {MAX_REASONS + 1} reasons, limit {MAX_REASONS}"
    assert MAX_REASONS == 32


def test_an_admission_the_worker_could_not_use_is_refused_saying_why():
    """The worker takes any other decision, or a promise outside its page counts, for no
    decision at all: refused here, every criterion says why (a ledger that answered
    'accept' read that it admitted nothing)."""
    def admission(decision, pages):
        return {"__type__": "Admission", "decision": decision, "reserve_pages": pages, "reason": ""}
    for decision in ("admit", "wait", "reject"):
        within_domain("admit", admission(decision, 0), ())
    within_domain("admit", admission("admit", (1 << 40) - 1), ())
    for decision, pages in (("wait", -1), ("reject", 1 << 61)):    # read only when admitted
        within_domain("admit", admission(decision, pages), ())
    with pytest.raises(InvalidValue) as e:
        within_domain("admit", admission("accept", 3), ())
    assert e.value.message == "Admission.decision: 'accept' is not one of admit, wait, reject"
    for pages in (-1, 1 << 40, (1 << 40) + 1, 1 << 61):     # the bound, and past it
        with pytest.raises(InvalidValue) as e:
            within_domain("admit", admission("admit", pages), ())
        assert e.value.message == (f"Admission.reserve_pages: {pages} pages is not a promise the worker "
                                   "can keep (0 to 2**40 - 1 pages)")


@pytest.mark.parametrize("function,value", [
    # Answers of the wrong shape are left to coerce, which names what is wrong with them.
    ("on_event", ["stop_scheduling"] * 10), ("on_event", {"actions": "x" * 10}),
    ("on_event", {"__type__": "Transition", "actions": None}),
    ("decide_release", ["r"] * 100), ("decide_release", {"reasons": {str(i): 1 for i in range(100)}}),
    ("publishable", {"pages": [0] * 10}),
    # Other functions (named before and after the bounded ones) have no domain bound here:
    # their answers are bounded by coerce alone.
    ("choose_chunk", [0] * 10), ("qualify", [0] * 10),
    ("admit", {"actions": ["x"] * 10, "reasons": ["r"] * 100}),
    ("worst_case_pages", {"actions": ["x"] * 10, "reasons": ["r"] * 100}),
    ("publishable", {"actions": ["x"] * 10}), ("prefix_key", {"actions": ["x"] * 10}),
])
def test_domain_bounds_apply_to_their_function_and_field_only(function, value):
    within_domain(function, value, ())


# ---- the fast path: a right answer is decided there, at the same value the careful path
# gives; anything else is handed over, never accepted (it would skip the careful checks).

def _careful(value, expected):
    from grader.engine.validate import _coerce
    return _coerce(value, expected, "")


_LIMIT = 2 ** 62        # |int| must stay below it (written out, not read from the module)

RIGHT_ANSWERS = [
    (True, bool), (False, bool), (0, int), (_LIMIT - 1, int), (-_LIMIT + 1, int),
    (0.25, float), (3, float), (_LIMIT - 1, float), (-_LIMIT + 1, float), ("", str), ("ok", str),
    ("\u00e9t\u00e9", str), ("x" * 10_000, str),
    ([], tuple[int, ...]), ([1, 2], tuple[int, ...]), ((3,), tuple[int, ...]),
    ([_LIMIT - 1, -_LIMIT + 1], tuple[int, ...]), ([0] * 100_000, tuple[int, ...]),
    ({"__type__": "Verdict", "ok": True, "reason": "x"}, Verdict),     # every field given
    ({"__type__": "Verdict", "ok": False}, Verdict),                   # a default left out
    ({"__type__": "Slo", "ttft_s": 1, "gap_s": 0.5}, Slo),
    ({"__type__": "PageInfo", "index": 0, "prompt_tokens": 16, "page_tokens": 16,
      "written_tokens": 3, "published": False}, PageInfo),
]


@pytest.mark.parametrize("value,expected", RIGHT_ANSWERS, ids=range(len(RIGHT_ANSWERS)))
def test_a_right_answer_is_decided_by_the_fast_path_as_the_careful_path_decides_it(value, expected):
    from grader.engine.validate import _DOUBT, _fast_path
    fast = _fast_path(expected)
    assert fast is not None
    got = fast(value)
    assert got is not _DOUBT
    want = _careful(value, expected)
    assert got == want and type(got) is type(want)
    assert type(coerce(value, expected)) is type(want)


@pytest.mark.parametrize("value,expected", [
    # Next to the bounds of an int, alone and inside a tuple, and items of another kind.
    (_LIMIT, int), (-_LIMIT, int), (_LIMIT, float), (-_LIMIT, float),
    *[([x], tuple[int, ...]) for x in (_LIMIT, -_LIMIT, 2 ** 63, -(2 ** 63), True, 1.5, "2", None)],
    ([1, True], tuple[int, ...]), ([1, 1.5], tuple[int, ...]),
    ("x" * 10_001, str), ("\ud800", str), (5, str), (1, bool), (True, int), (True, float),
    # A dataclass with another tag, no tag, a key that is not a field, a field of the
    # wrong kind, a required field left out: each of the same size as a right answer.
    ({"__type__": "Slo", "ok": True}, Verdict), ({"ok": True, "reason": ""}, Verdict),
    ({"__type__": "Verdict", "ok": True, "okay": ""}, Verdict),
    ({"__type__": "Verdict", "ok": 1, "reason": ""}, Verdict),
    ({"__type__": "Verdict", "reason": "", "why": ""}, Verdict),
    ({"__type__": "Slo", "ttft_s": 1.0}, Slo),
])
def test_a_wrong_answer_is_refused_with_a_message_whatever_path_sees_it_first(value, expected):
    from grader.engine.validate import _DOUBT, _fast_path
    assert _fast_path(expected)(value) is _DOUBT
    with pytest.raises(InvalidValue):
        coerce(value, expected)


def test_an_unsupported_class_is_named_as_unsupported():
    # A class validate has no rule for is the grader's mistake, said in those words (not an
    # error from deep inside the dataclass machinery).
    for expected in (dict, list, Verdict(True)):
        with pytest.raises(TypeError, match="validate does not support"):
            coerce({}, expected)


def test_a_release_decisions_one_reason_given_as_a_str_is_read_as_that_reason_and_nothing_else_is():
    def decision(reasons):
        return {"__type__": "ReleaseDecision", "decision": "ship", "reasons": reasons}
    assert read_answer("decide_release", decision("a real gain"), (), ReleaseDecision) == \
        ReleaseDecision("ship", ("a real gain",))
    assert read_answer("decide_release", decision(["a", "b"]), (), ReleaseDecision) == \
        ReleaseDecision("ship", ("a", "b"))
    assert read_answer("decide_release", decision(""), (), ReleaseDecision) == ReleaseDecision("ship", ("",))
    # Only decide_release's reasons, and only a str: the same answer from another function,
    # or a number given as the reasons, is refused as before.
    with pytest.raises(InvalidValue):
        read_answer("decide_release", decision(3), (), ReleaseDecision)
    for other in ("qualify", "admit", "check_contract"):     # names sorting after and before it
        with pytest.raises(InvalidValue):
            read_answer(other, decision("a real gain"), (), ReleaseDecision)
    assert read_answer("decide_release", "ship", (), str) == "ship"    # not a dict: as it is

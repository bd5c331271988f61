"""Type-valid but huge answers: bounded by their domain before the grader or the worker
spends time on them, so a grade ends and says why (before this, one lesson 4 grade ran
past 15 minutes in the grader process, where the sandbox's budget does not reach)."""
import subprocess
import sys

import pytest
import yaml

from conftest import ROOT
from grader.engine.sandbox.session import Sandbox
from grader.engine.validate import InvalidValue, within_domain
from reference.shapes import ACTIONS, PageInfo

HUGE = 100_000
RUNAWAY = f'''from reference.shapes import Transition

def on_event(state, event, step_in_flight):
    if event == "cancel":
        return Transition("cancelling", ("stop_scheduling",) * {HUGE})
    return Transition(state, ())


def prefix_key(scope, parent_key, block_tokens):
    return scope + "/" + parent_key + "/" + ",".join(map(str, block_tokens))


def publishable(pages):
    return tuple(range({HUGE}))
'''


def test_huge_answers_are_invalid_by_their_domain():
    with pytest.raises(InvalidValue, match="at most the 3 the course defines"):
        within_domain("on_event", {"__type__": "Transition", "next_state": "done",
                                   "actions": ["notify_client"] * 4}, ())
    within_domain("on_event", {"__type__": "Transition", "next_state": "done",
                               "actions": list(ACTIONS)}, ())
    offered = (PageInfo(0, 16, 16, 16, False), PageInfo(1, 16, 16, 16, False))
    with pytest.raises(InvalidValue, match="3 page indices for 2 pages offered"):
        within_domain("publishable", [0, 1, 1], (offered,))
    within_domain("publishable", [0, 1], (offered,))
    with pytest.raises(InvalidValue, match="reasons"):
        within_domain("decide_release", {"__type__": "ReleaseDecision", "release": True,
                                         "reasons": ["x"] * 33}, ())


def test_a_lesson4_grade_with_huge_answers_ends_and_says_why(tmp_path):
    path = tmp_path / "runaway.py"
    path.write_text(RUNAWAY)
    # A budget of 10 s a sandbox instead of 60: the grader's own work on the answers is
    # charged to it, so the grade still ends by the budget (or sooner), and a grader that
    # stopped charging that work would again run for many minutes, past the timeout.
    code = ("import sys; sys.path[:0] = [%r, %r]\n"
            "from dataclasses import replace\n"
            "from grader.engine.sandbox import session\n"
            "session.DEFAULT_LIMITS = replace(session.DEFAULT_LIMITS, run_timeout_s=10.0)\n"
            "from conftest import grade, SECRET\n"
            "r = grade('lesson4', %r, 'grade', SECRET)\n"
            "print('\\n'.join(c.feedback.replace('\\n', ' ') for c in r.criteria))\n") % (str(ROOT / "tests"), str(ROOT), str(path))
    # A hang guard only: the grade must end; no assertion on how fast.
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    # Each criterion says why it failed: the answer's domain, or, when the budget ran out
    # before the function was asked (how far the grade got depends on the machine's load),
    # the budget. The first calls are on_event's, long before any budget ends.
    feedback = done.stdout.splitlines()
    criteria = yaml.safe_load((ROOT / "rubrics" / "lesson4.yaml").read_text())["criteria"]
    assert len(feedback) == len(criteria) and "at most the 3 the course defines" in feedback[0]
    why = ("at most the 3 the course defines", f"{HUGE} page indices for", "used up its time budget")
    assert all(any(w in line for w in why) for line in feedback), feedback


SWELL = '''import os, sys, time
BODY = b'{"ok":[' + b"[]," * 354983 + b'[]]}'      # 1 MiB + 16 KiB: 3 * 354983 + 11 bytes
assert len(BODY) == (1 << 20) + (16 << 10)


def pages_for(*args):
    for _ in range(6):
        os.write(int(sys.argv[2]), len(BODY).to_bytes(4, "big") + BODY)
    time.sleep(1000)
'''


def test_answers_that_swell_in_the_grader_draw_on_one_allowance():
    """Each frame parses into 354984 lists (about 25 MB in the grader). Its first 16 KiB
    are free and 1 MiB of it draws on the 4 MiB allowance: four answers fit, the fifth is
    refused unparsed, and so is the first of the restarted child (the allowance is the
    submission's, not a child's). Limits far above what the calls need: no timing."""
    with Sandbox(SWELL, "exercise.py", call_timeout_s=60, run_timeout_s=600) as box:
        results = box.call_many("pages_for", [(1, 16)] * 6)
    assert [r.status for r in results] == ["ok"] * 4 + ["bad"] * 2, results[-1].detail
    assert all(len(r.value) == 354984 for r in results[:4])
    assert "answer of 1064960 bytes after 4.0 MiB of large answers" in results[4].detail
    assert "draws on 4 MiB shared by all its calls" in results[5].detail
    # Each refusal stopped the child (the learner's tools then stop asking the function).
    assert [r.stopped for r in results] == [False] * 4 + [True] * 2


def test_a_load_that_swells_draws_on_the_same_allowance():
    """The frame that says the file loaded is written after learner code has run: one
    forged at import, 5 MiB of "[]," under a "loaded" key, is refused unparsed (its 5 MiB
    less the free 16 KiB is past the 4 MiB allowance), not parsed into 1.7 million lists."""
    forged = '''import os, sys
BODY = b'{"loaded":true,"x":[' + b"[]," * ((5 << 20) // 3) + b'[]]}'
os.write(int(sys.argv[2]), len(BODY).to_bytes(4, "big") + BODY)
'''
    with Sandbox(forged, "exercise.py", call_timeout_s=60, load_timeout_s=60) as box:
        error = box.load_error
    assert error is not None and "draws on 4 MiB shared by all its calls" in error, error


@pytest.mark.parametrize("mode", ["check", "grade"])
def test_an_answer_nested_near_the_recursion_limit_is_one_bad_answer(mode):
    """attacks/deep_answer.py writes its own frames: lists nested 850 to 1000 levels deep,
    which parse in the grader. Lesson 2's runs validate them deeper in the grader's stack
    than they were parsed, and validate's message (a repr of the list) ended the check or
    grade with a RecursionError; the wire now refuses a frame nested past 32 levels."""
    from conftest import SECRET, grade
    attack = ROOT / "tests" / "adversarial" / "attacks" / "deep_answer.py"
    report = grade("lesson2", attack, mode, SECRET if mode == "grade" else None)
    assert report.score == 0
    assert "nested more than 31 levels deep" in " ".join(c.feedback for c in report.criteria)


def test_the_wire_bounds_a_frames_nesting():
    from grader.engine.sandbox.wire import MAX_NESTING, parse_answer
    for levels, refused in ((MAX_NESTING - 1, False), (MAX_NESTING, True), (200, True)):
        frame = ('{"ok":' + "[" * levels + "]" * levels + "}").encode()   # the frame's own {} too
        assert (parse_answer(frame)[1] is not None) == refused, levels
    wide = ('{"ok":[' + ",".join(["[[1.5]]"] * 100) + "]}").encode()   # many brackets, shallow
    assert parse_answer(wide)[1] is None
    nested = ('{"ok":{"a":[' + "[" * 40 + "]" * 40 + "]}}").encode()
    assert "nested more than" in parse_answer(nested)[1]

"""Hidden inputs stay hidden: a submission that echoes every argument it has ever been
given (in its answers and in its exceptions) gets none of a hidden case's inputs into the
feedback a course hands back with `grader feedback --public-only`, for every criterion.

The echo is a short hash of each argument's repr, which the test computes for every
hidden case's inputs on its side (the child rebuilds the same shapes, so the reprs
agree). The echo of public inputs does reach the page: the channel works."""
import hashlib
import json
import re

import pytest

from conftest import ROOT, SECRET
from grader.cli import main
from grader.engine.layout import find_course
from grader.engine import pipeline
from grader.engine.pipeline import build_cases, grade_path
from grader.engine.sandbox import Sandbox

ECHO = '''
import hashlib
SEEN = []


def _echo(*args):
    for a in args:
        SEEN.insert(0, hashlib.sha256(repr(a).encode()).hexdigest()[:8])
    return "SEEN:" + ",".join(SEEN[:30])


def _raising(*args):
    raise ValueError(_echo(*args))


def _returning(*args):
    return _echo(*args)


kv_bytes_per_token = pool_pages = pages_for = prefix_key = _returning
worst_case_pages = check_contract = admit = choose_chunk = on_event = publishable = _raising
'''


def needles(lesson: str) -> tuple[set, set]:
    """Hashes of the public cases' inputs, and of every hidden case's inputs that no
    public case shares."""
    def hashes(value):
        parts = list(value) if isinstance(value, tuple) else [value]
        return {hashlib.sha256(repr(p).encode()).hexdigest()[:8] for p in [value, *parts]}
    cases = build_cases(lesson, find_course(str(ROOT)), SECRET)
    public = set().union(*(hashes(c.inputs) for c in cases if c.visibility == "public"))
    hidden = set().union(*(hashes(c.inputs) for c in cases if c.visibility == "hidden"))
    return public, hidden - public


@pytest.mark.parametrize("lesson", ["lesson1", "lesson2", "lesson3", "lesson4"])
def test_public_only_feedback_names_no_hidden_input(lesson, tmp_path, capsys):
    folder = tmp_path / "class"
    folder.mkdir()
    (folder / "echo.py").write_text(ECHO)
    secret, book = tmp_path / "course.secret", f"sqlite:///{tmp_path / 'gradebook.db'}"
    secret.write_bytes(SECRET)
    assert main(["grade", lesson, str(folder), "--secret-file", str(secret), "--gradebook", book,
                 "--quiet", "--jobs", "1"]) == 0
    public, hidden = needles(lesson)
    assert hidden
    out = tmp_path / "feedback"
    assert main(["feedback", "--gradebook", book, "--out", str(out), "--lesson", lesson,
                 "--public-only"]) == 0
    [page] = out.iterdir()
    echoed = set(re.findall(r"[0-9a-f]{8}", page.read_text().replace("\\", "")))
    assert echoed & public          # the channel works: the echo of public inputs is there
    assert not echoed & hidden      # and no hidden input is
    capsys.readouterr()


def test_public_feedback_is_measured_before_the_hidden_child_hears_anything(monkeypatch):
    """The hidden child's timing reaches the public one: sleeping 0.02 s per layer of its
    first hidden model, it put "gap 1.81 s -> layers about 90" (the model had 90) into
    the next criterion's public feedback, the public child having timed the pause between
    two of its own calls. So a grade measures every criterion's public feedback first:
    no public measure starts once the hidden child has been called. The order is asserted,
    not a time."""
    events = []
    real_context, real_batch = pipeline.CheckContext, Sandbox._run_batch

    def context(box, subset, *args, public_sandbox=None, **kw):
        events.append(("measure", box is public_sandbox))
        return real_context(box, subset, *args, public_sandbox=public_sandbox, **kw)

    def batch(self, calls):
        events.append(("call", self))
        return real_batch(self, calls)
    monkeypatch.setattr(pipeline, "CheckContext", context)
    monkeypatch.setattr(Sandbox, "_run_batch", batch)
    report = grade_path("lesson1", ROOT / "reference" / "solutions" / "lesson1.py",
                        find_course(str(ROOT)), mode="grade", secret=SECRET)
    assert report.score == report.max_score
    public_box = next(what for kind, what in events if kind == "call")   # criterion 1's public cases
    first_hidden = next(i for i, (kind, what) in enumerate(events)
                        if kind == "call" and what is not public_box)
    public_measures = [i for i, event in enumerate(events) if event == ("measure", True)]
    assert len(public_measures) == 6 and max(public_measures) < first_hidden, events

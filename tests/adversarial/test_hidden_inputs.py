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
from grader.engine.pipeline import build_cases

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

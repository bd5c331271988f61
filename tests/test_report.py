"""A grading report's totals, its JSON form and its terminal table (grader/engine/report.py).

Expected values are written out by hand: the totals from the criteria listed here, the
table's lines as a learner reads them."""
import json
import textwrap

import pytest

from grader.engine.report import COST_MODEL_NOTE, CriterionResult, Report, render


def crit(id, score, max_score, passed=None, feedback="", checked=True):
    return CriterionResult(id=id, title=f"title of {id}", score=score, max_score=max_score,
                           passed=score == max_score if passed is None else passed,
                           feedback=feedback, visibility="public", checked=checked)


def report(*criteria, notes=(), cases=({"name": "a"}, {"name": "b"})):
    return Report(lesson="lesson9", title="A title", mode="check", submission="my.py",
                  submission_digest="d" * 64, rubric_version=3, criteria=tuple(criteria),
                  cases=tuple(cases), isolation="none here", grader_version="0.0",
                  duration_s=1.5, notes=tuple(notes))


def test_totals_count_only_the_criteria_this_edition_checked():
    r = report(crit("a", 2, 2), crit("b", 0.5, 3), crit("c", 0, 4, checked=False))
    assert r.score == 2.5 and r.max_score == 5


def test_totals_are_rounded_to_four_places():
    # 0.1 + 0.2 is 0.30000000000000004 in floating point; a report shows 0.3.
    r = report(crit("a", 0.1, 0.1), crit("b", 0.2, 0.2), crit("c", 1 / 3, 1))
    assert r.score == 0.6333 and r.max_score == 1.3


def test_json_form_holds_every_field_the_totals_and_the_cost_model_note():
    r = report(crit("a", 1, 2, feedback="why"), notes=("a note",))
    d = json.loads(json.dumps(r.to_dict()))
    assert d["score"] == 1 and d["max_score"] == 2 and d["cost_model"] == COST_MODEL_NOTE
    assert d["lesson"] == "lesson9" and d["mode"] == "check" and d["duration_s"] == 1.5
    assert d["notes"] == ["a note"] and d["cases"] == [{"name": "a"}, {"name": "b"}]
    assert d["criteria"][0] == {
        "id": "a", "title": "title of a", "score": 1, "max_score": 2, "passed": False,
        "feedback": "why", "visibility": "public", "evidence": [], "checked": True,
        "public_feedback": ""}


def test_table_lines_as_a_learner_reads_them():
    r = report(crit("ledger", 3, 3), crit("fence_held", 1.25, 2.5, feedback="freed too soon"),
               crit("goodput", 0, 4, feedback="no run qualified"),
               crit("plots", 0, 1, checked=False, feedback="not in this edition"),
               notes=("first note", "second note"))
    lines = render(r, width=80).splitlines()
    assert lines[0] == "lesson9: A title  (check, my.py)"
    assert lines[1] == ""
    # The id column is as wide as the longest id, and never narrower than its heading.
    # The points column ends at 2 + 10 (fence_held) + 2 + 11 characters.
    assert lines[2] == "  criterion        points  result"
    assert lines[3] == "  ledger              3/3  pass  title of ledger"
    assert lines[4] == "  fence_held     1.25/2.5  part  title of fence_held"
    assert lines[5] == "                ->" + " freed too soon"
    assert lines[6] == "  goodput             0/4  FAIL  title of goodput"
    assert lines[7] == "                -> no run qualified"
    assert lines[8] == "  plots               -/1  n/a   title of plots"
    assert lines[9] == "                -> not in this edition"
    assert lines[10] == ""
    assert lines[11] == "  total 4.25 / 9.5   (2 cases; isolation: none here)"
    assert lines[12:] == ["  note: first note", "  note: second note", f"  {COST_MODEL_NOTE}"]


def test_a_long_id_widens_the_column_and_a_passed_criterion_shows_no_feedback():
    r = report(crit("a_rather_long_criterion_id", 1, 1, feedback="kept quiet"), notes=())
    lines = render(r, width=80).splitlines()
    # 26 characters of id: the heading is padded to them.
    assert lines[2] == "  criterion" + " " * 17 + "  " + "     points  result"
    assert lines[3] == "  a_rather_long_criterion_id          1/1  pass  title of a_rather_long_criterion_id"
    assert "kept quiet" not in render(r, width=80)


def test_failed_criterion_with_no_feedback_still_gets_its_arrow_line():
    lines = render(report(crit("a", 0, 1)), width=80).splitlines()
    assert lines[4] == " " * (2 + 9 + 4) + "-> "


@pytest.mark.parametrize("width", [40, 60, 100])
def test_feedback_wraps_to_the_width_left_beside_the_id_column(width):
    words = " ".join(f"word{i:02d}" for i in range(40))
    lines = render(report(crit("abc", 0, 1, feedback=words)), width=width).splitlines()
    arrows = [l for l in lines if "-> " in l]
    name_w = len("criterion")
    assert [l.split("-> ", 1)[1] for l in arrows] == \
        textwrap.wrap(words, width - name_w - 9)
    assert all(l.startswith(" " * (2 + name_w + 4) + "-> ") for l in arrows)
    # Each line fits the width: the indent and the arrow take name_w + 9 of it.
    assert max(len(l) for l in arrows) <= width


def test_without_a_width_the_terminal_width_is_used_up_to_100(monkeypatch):
    import shutil
    words = " ".join(["abcdefghi"] * 30)
    r = report(crit("a", 0, 1, feedback=words))
    monkeypatch.setattr(shutil, "get_terminal_size", lambda fallback: type("S", (), {"columns": 50})())
    assert max(len(l) for l in render(r).splitlines() if "-> " in l) <= 50
    monkeypatch.setattr(shutil, "get_terminal_size", lambda fallback: type("S", (), {"columns": 300})())
    assert 90 < max(len(l) for l in render(r).splitlines() if "-> " in l) <= 100


@pytest.mark.parametrize("width", [1, 20, 36])
def test_a_terminal_too_narrow_for_the_columns_still_gets_the_feedback(width):
    # A 36-column pane and a 29-character criterion id left no room: textwrap refused a
    # negative width, and `grader check` died after grading. Feedback keeps 24 columns.
    words = " ".join(f"w{i:02d}" for i in range(30))
    r = report(crit("table-no-release-while-pinned", 0, 1, feedback=words))
    parts = [l.split("-> ", 1)[1] for l in render(r, width=width).splitlines() if "-> " in l]
    assert parts == textwrap.wrap(words, 24)

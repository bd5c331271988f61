"""A grading report's totals, its JSON form and its terminal table (grader/engine/report.py).

Expected values are written out by hand: the totals from the criteria listed here, the
table's lines as a learner reads them."""
import dataclasses
import json
import os
import re
import textwrap

import pytest

from conftest import ROOT
from grader.engine.report import COST_MODEL_NOTE, CriterionResult, Report, isolation_in_brief, render


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


def test_a_total_with_nothing_left_out_says_nothing_of_it():
    lines = render(report(crit("a", 2, 2)), width=100).splitlines()
    assert [l for l in lines if l.startswith("  total")] == ["  total 2 / 2   (2 cases; isolation: none here)"]


@pytest.mark.parametrize("isolation,brief", [
    # Each layer by its name; how it is set up is dropped, nested asides with it.
    ("bwrap(no network, tmpfs /tmp 16 MiB): no_new_privs, landlock(ABI 7: reads only the "
     "interpreter (and its libraries)), rlimits(as,cpu), clean env",
     "bwrap: no_new_privs, landlock, rlimits, clean env"),
    # What the child lacks, and why bubblewrap was not used, stay: they are the warning.
    ("NOT CONFINED (lacks landlock (kernel 5.4), seccomp): process (no bwrap: not on PATH): "
     "no_new_privs, rlimits(as)",
     "NOT CONFINED (lacks landlock, seccomp): process (no bwrap: not on PATH): no_new_privs, rlimits"),
    # A kept aside and a nested one in one text: every level goes, not only the first pass's.
    ("process (no bwrap: x): landlock(ABI 7: reads (a, b))", "process (no bwrap: x): landlock"),
    ("none needed: the submission is data", "none needed: the submission is data"),
    ("an unclosed (aside", "an unclosed (aside"),
])
def test_the_terminal_names_the_isolation_by_its_layers(isolation, brief):
    assert isolation_in_brief(isolation) == brief


def test_a_total_whose_isolation_was_shortened_says_where_it_is_in_full():
    r = dataclasses.replace(report(crit("a", 2, 2)), isolation="bwrap(no network): seccomp(82 calls)")
    assert render(r, width=100).splitlines()[-2] == (
        "  total 2 / 2   (2 cases; isolation: bwrap: seccomp; in full with --json)")
    assert json.loads(json.dumps(r.to_dict()))["isolation"] == "bwrap(no network): seccomp(82 calls)"
    # Shortened only at its end, the brief is the start of the whole: still said.
    r = dataclasses.replace(r, isolation="process (no bwrap: x): rlimits(as)")
    assert render(r, width=100).splitlines()[-2] == (
        "  total 2 / 2   (2 cases; isolation: process (no bwrap: x): rlimits; in full with --json)")


def test_totals_are_rounded_to_four_places():
    # 0.1 + 0.2 is 0.30000000000000004 in floating point; a report shows 0.3.
    r = report(crit("a", 0.1, 0.1), crit("b", 0.2, 0.2), crit("c", 1 / 3, 2 / 3, passed=False))
    assert r.score == 0.6333 and r.max_score == 0.9667


def test_a_criterion_counts_unless_said_otherwise_and_crosses_boundaries_frozen():
    plain = CriterionResult(id="a", title="t", score=1, max_score=2, passed=False, feedback="",
                            visibility="public")
    assert plain.checked is True and report(plain).max_score == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        plain.score = 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        report(plain).lesson = "lesson1"


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


def test_the_json_keys_the_instructors_page_lists_are_the_reports():
    """Scripts read `grader grade --json` by the keys docs/instructors.md lists: the list is
    the report's, no more and no less, at the top and in each criterion."""
    text = " ".join((ROOT / "docs" / "instructors.md").read_text(encoding="utf-8").split())
    listed = text[text.index("The `--json` report has:"):text.index("A criterion's `feedback`")]
    per_criterion = re.search(r"`criteria` \(([^)]*)\)", listed).group(1)
    d = json.loads(json.dumps(report(crit("a", 1, 2)).to_dict()))
    assert set(re.findall(r"`(\w+)`", listed.replace(per_criterion, ""))) == set(d)
    assert set(re.findall(r"`(\w+)`", per_criterion)) == set(d["criteria"][0])


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
    # The n/a criterion's point is named beside a total that leaves it out: 4.25 / 9.5 alone
    # read as the whole lesson.
    assert lines[11] == "  total 4.25 / 9.5   (1 of 10.5 points not checked here; 2 cases; isolation:"
    assert lines[12] == "    none here)"
    assert lines[13:] == ["  note: first note", "  note: second note",
                          *textwrap.wrap(f"  {COST_MODEL_NOTE}", 80, subsequent_indent="  ")]
    assert max(len(l) for l in lines) <= 80


def test_a_long_id_widens_the_column_and_a_passed_criterion_shows_no_feedback():
    r = report(crit("a_rather_long_criterion_id", 1, 1, feedback="kept quiet"), notes=())
    lines = render(r, width=80).splitlines()
    # 26 characters of id: the heading is padded to them.
    assert lines[2] == "  criterion" + " " * 17 + "  " + "     points  result"
    # The title wraps in the columns left beside the row (80 - 49), continuing under itself.
    assert lines[3] == "  a_rather_long_criterion_id          1/1  pass  title of"
    assert lines[4] == " " * 49 + "a_rather_long_criterion_id"
    assert "kept quiet" not in render(r, width=80)


def test_any_points_at_all_is_part_not_fail():
    lines = render(report(crit("a", 0.5, 1), crit("b", 0.0001, 1)), width=80).splitlines()
    assert lines[3].split()[1:3] == ["0.5/1", "part"]
    assert lines[5].split()[1:3] == ["0.0001/1", "part"]


def test_failed_criterion_with_no_feedback_still_gets_its_arrow_line():
    lines = render(report(crit("a", 0, 1)), width=80).splitlines()
    assert lines[4] == " " * (2 + 9 + 4) + "-> "


def fitting(room: int) -> str:
    """Feedback whose first line is exactly `room` characters and whose next two words make
    room + 1: wrapped one column narrower or wider, it breaks elsewhere."""
    half = room // 2
    return " ".join(("a" * half, "b" * (room - half - 1), "c" * half, "d" * (room - half)))


def test_fitting_breaks_only_at_its_own_room():
    assert textwrap.wrap(fitting(42), 42) == ["a" * 21 + " " + "b" * 20, "c" * 21, "d" * 21]
    assert len(textwrap.wrap(fitting(42), 41)) == 4 and len(textwrap.wrap(fitting(42), 43)) == 2


@pytest.mark.parametrize("width", [42, 60, 100])   # 42: the least above the 24-column floor
def test_feedback_wraps_to_the_width_left_beside_the_id_column(width):
    name_w = len("criterion")
    room = width - name_w - 9               # the indent and the arrow take name_w + 9
    lines = render(report(crit("abc", 0, 1, feedback=fitting(room))), width=width).splitlines()
    arrows = [l for l in lines if "-> " in l]
    assert [l.split("-> ", 1)[1] for l in arrows] == textwrap.wrap(fitting(room), room)
    assert all(l.startswith(" " * (2 + name_w + 4) + "-> ") for l in arrows)
    assert max(len(l) for l in arrows) == width


def test_without_a_width_the_terminal_width_is_used_up_to_100(monkeypatch):
    import shutil
    r = report(crit("a", 0, 1, feedback=fitting(100 - 18) + " " + fitting(50 - 18)))
    for columns, like in ((50, 50), (100, 100), (101, 100), (300, 100)):
        monkeypatch.setattr(shutil, "get_terminal_size", lambda fallback: os.terminal_size((columns, 20)))
        assert render(r) == render(r, width=like)


def test_without_a_terminal_the_width_is_100(monkeypatch):
    # shutil.get_terminal_size: $COLUMNS, else the terminal of stdout, else the fallback.
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)
    monkeypatch.setattr(os, "get_terminal_size", lambda *a: (_ for _ in ()).throw(OSError("no tty")))
    r = report(crit("a", 0, 1, feedback=fitting(100 - 18) + " " + fitting(99 - 18)))
    assert render(r) == render(r, width=100) != render(r, width=99)


@pytest.mark.parametrize("width", [1, 20, 36])
def test_a_terminal_too_narrow_for_the_columns_still_gets_the_feedback(width):
    # A 36-column pane and a 29-character criterion id left no room: textwrap refused a
    # negative width, and `grader check` died after grading. There, the feedback goes under
    # the row behind a short arrow, in the pane's width and never fewer than 24 columns.
    r = report(crit("table-no-release-while-pinned", 0, 1, feedback=fitting(24)))
    arrows = [l for l in render(r, width=width).splitlines() if "-> " in l]
    room = max(24, width - 7)
    assert [l.split("-> ", 1)[1] for l in arrows] == textwrap.wrap(fitting(24), room)
    assert all(l.startswith("    -> ") for l in arrows)


def test_a_narrow_pane_puts_titles_and_the_total_under_the_row_within_its_width():
    """COLUMNS=40 with lesson 4's 29-character ids: the title went out to column 100 and the
    total's isolation line to 530; both now wrap within the pane."""
    title = "No release while a step that reads the pages is in flight, on every path"
    r = report(crit("table-no-release-while-pinned", 0, 1, feedback="freed too soon"))
    r = dataclasses.replace(r, criteria=(dataclasses.replace(r.criteria[0], title=title),),
                            isolation="bwrap(" + "a long list of the confinement's parts, " * 8 + ")")
    lines = render(r, width=40).splitlines()
    assert lines[3] == "  table-no-release-while-pinned  " + f"{'0/1':>11}" + "  FAIL"   # the row alone
    assert [l[4:] for l in lines[4:4 + len(textwrap.wrap(title, 36))]] == textwrap.wrap(title, 36)
    below = lines[4 + len(textwrap.wrap(title, 36)):]
    assert below[0] == "    -> freed too soon"
    assert all(len(l) <= 40 for l in below)


@pytest.mark.parametrize("width,beside", [(56, True), (55, False)])
def test_a_title_stays_beside_its_row_while_24_columns_are_left_there(width, beside):
    """The row takes 2 + 9 + 2 + 11 + 2 + 4 + 2 = 32 columns here: at 56 the title has its 24
    beside the row (wrapped there, continued under itself); at 55 it goes under the row."""
    r = report(crit("abc", 1, 1))
    r = dataclasses.replace(r, criteria=(dataclasses.replace(r.criteria[0], title=fitting(24)),))
    lines = render(r, width=width).splitlines()
    row = "  abc      " + "  " + f"{'1/1':>11}" + "  pass"
    if beside:
        parts = textwrap.wrap(fitting(24), 24)
        assert lines[3] == row + "  " + parts[0]
        assert lines[4:4 + len(parts) - 1] == [" " * 32 + p for p in parts[1:]]
    else:
        parts = textwrap.wrap(fitting(24), width - 4)
        assert lines[3] == row and lines[4:4 + len(parts)] == ["    " + p for p in parts]


@pytest.mark.parametrize("width,long", [(42, True), (41, False)])
def test_the_feedback_arrow_keeps_its_column_while_24_are_left_beside_the_id(width, long):
    arrows = [l for l in render(report(crit("abc", 0, 1, feedback="why")), width=width).splitlines() if "-> " in l]
    assert arrows == [(" " * 15 if long else "    ") + "-> why"]


def test_a_title_under_its_row_wraps_at_the_panes_width_less_its_indent():
    r = report(crit("table-no-release-while-pinned", 1, 1))
    r = dataclasses.replace(r, criteria=(dataclasses.replace(r.criteria[0], title=fitting(36)),))
    lines = render(r, width=40).splitlines()
    parts = textwrap.wrap(fitting(36), 36)
    assert lines[4:4 + len(parts)] == ["    " + p for p in parts]
    assert parts != textwrap.wrap(fitting(36), 35) and parts != textwrap.wrap(fitting(36), 37)


def test_points_left_out_are_rounded_to_four_places_as_the_totals_are():
    # 0.12344 + 0.00003 = 0.12347 points unchecked: shown as 0.1235, of 1 + 0.1235 in all.
    r = report(crit("a", 1, 1), crit("b", 0, 0.12344, checked=False),
               crit("c", 0, 0.00003, checked=False))
    text = " ".join(render(r, width=200).split())
    assert "(0.1235 of 1.1235 points not checked here;" in text

"""A learner's own functions as the core the design sheet's knobs distort (grader sheet run
--own, and always in the learner edition): the reference's files give the reference's runs,
a stub lesson falls back to the course baseline and says so."""

import pytest

from conftest import ROOT
from grader.course import core, replay
from grader.course.sheet import load_sheet
from grader.course.trials import run_design
from grader.engine.layout import find_course
from reference.workload import with_overrides

COURSE = find_course(str(ROOT))
SHEET = ROOT / "assignments" / "lesson6" / "public" / "baseline.sheet.yaml"


def _bench(requests: int = 60):
    sheet, problems = load_sheet(SHEET, COURSE)
    assert not problems
    bench = replay.bench_for(sheet, SHEET, COURSE, None, "24,25")
    return sheet, bench, with_overrides(bench.workload, requests=requests)


def test_the_reference_files_as_ones_own_give_the_reference_runs_and_figures():
    sheet, bench, workload = _bench()
    d = replay.design("sheet", sheet, bench.worker)
    files = {f"lesson{n}": ROOT / "reference" / "solutions" / f"lesson{n}.py" for n in range(1, 6)}
    want = replay.replay(bench.model, d, workload, bench.seeds)
    with core.own_core(COURSE, files) as mine:
        assert mine.note == "your own functions" and mine.identity != "reference"
        got = replay.replay(bench.model, d, workload, bench.seeds, core=mine)
        for seed in bench.seeds:       # one run per core: the caches never mix two cores
            a = run_design(bench.model, d, workload, seed)[1]
            b = run_design(bench.model, d, workload, seed, mine)[1]
            assert a.digest() == b.digest()
    assert replay.figures(got) == replay.figures(want)


def test_stubs_fall_back_to_the_baselines_and_leave_the_runs_unqualified():
    sheet, bench, workload = _bench(40)
    d = replay.design("sheet", sheet, bench.worker)
    with core.own_core(COURSE) as mine:           # the course's own stubs
        for lesson in ("lesson1", "lesson2", "lesson3", "lesson4"):
            assert f"{lesson}: " in mine.note and "not written yet" in mine.note
        assert mine.qualify is None and mine.decide is None
        got = replay.replay(bench.model, d, workload, bench.seeds, core=mine)
    f = replay.figures(got)
    assert f["goodput_rps"] is None and sum(c["requests"] for c in f["outcomes"].values()) == 80
    text = replay.render_figures("sheet", f)
    assert "not qualified" in text and "completed" in text


def test_one_lesson_written_is_used_and_the_rest_are_baselines(tmp_path):
    sheet, bench, workload = _bench(40)
    d = replay.design("sheet", sheet, bench.worker)
    files = {"lesson3": ROOT / "reference" / "solutions" / "lesson3.py"}
    with core.own_core(COURSE, files) as mine:
        assert "lesson3" not in mine.note and "lesson2: admit not written yet" in mine.note
        from reference.baselines import baseline_admit, baseline_chunk
        assert mine.policy.choose_chunk is not baseline_chunk     # the sandboxed rule
        assert mine.policy.admit is baseline_admit
        replay.replay(bench.model, d, workload, bench.seeds[:1], core=mine)


def test_a_baseline_standing_in_says_which_design_it_is(tmp_path):
    """A learner replaying the demo's R41 and R42 with stubs saw the two alike and R41 with
    30 requests scheduled after their cancel, told only "the course baseline". The note now
    says what each baseline does; and a lesson 5 that does not load has no baseline at all."""
    broken = tmp_path / "mine.py"
    broken.write_text("def qualify(record, slo)\n    return 'good'\n")
    with core.own_core(COURSE, {"lesson5": broken}) as mine:
        note = mine.note
    assert "lesson2: admit not written yet: the course baseline (worst-case reservations with " \
           "nothing shared)" in note, note
    assert "lesson3: choose_chunk not written yet: the course baseline (fixed chunks, whatever the " \
           "gap budget)" in note, note
    assert "lesson4: on_event, prefix_key, publishable not written yet: the course baseline " \
           "(cancellation deferred to the request's end: recorded as scheduled after its cancel; " in note, note
    lesson5 = next(part for part in note.split("; ") if part.startswith("lesson5"))
    assert "did not load" in lesson5 and "no goodput or attainment" in lesson5, lesson5
    assert "the course baseline" not in lesson5, lesson5


def test_a_replay_with_functions_that_failed_says_so_and_why(tmp_path):
    """An admit returning a string: every request rejected, 'admit gave no usable decision'
    and no word of why. The replay's report now ends with the failed calls, as an
    experiment's does."""
    broken = tmp_path / "mine.py"
    broken.write_text("def admit(request, ledger):\n    return 'admit'\n")
    sheet, bench, workload = _bench(20)
    with core.own_core(COURSE, {"lesson2": broken}) as mine:
        text = replay.run_sheets(sheet, SHEET, COURSE, None, "24", None, False, core=mine)
    assert ("note: your functions failed on some calls (the worker's safe fallback answered them): "
            "admit failed on ") in text, text
    assert "(first: admit returned str 'admit', expected Admission)" in text, text
    with core.own_core(COURSE) as stubs:         # nothing called, nothing failed
        assert stubs.failed_calls() == ""


def test_a_qualify_that_returns_no_verdict_is_told_what_it_returned(tmp_path):
    import pytest
    from grader.engine.errors import InputError
    mine_py = tmp_path / "mine.py"
    mine_py.write_text("def qualify(record, slo):\n    return True\n\n\n"
                       "def decide_release(b, c, rule):\n    raise NotImplementedError\n")
    sheet, bench, workload = _bench(20)
    with core.own_core(COURSE, {"lesson5": mine_py}) as mine:
        with pytest.raises(InputError) as info:
            replay.run_sheets(sheet, SHEET, COURSE, None, "24", None, False, core=mine)
    assert "returned bool True, not one of good, late_first_token, slow_tokens, rejected, failed, " \
           "excluded" in str(info.value), str(info.value)


def _qualify_only(tmp_path):
    """Lesson 5 half done, as its README orders the work: the reference's qualify and goodput,
    decide_release still the stub."""
    source = (ROOT / "reference" / "solutions" / "lesson5.py").read_text(encoding="utf-8")
    source += "\n\ndef decide_release(baseline_runs, candidate_runs, rule):\n    raise NotImplementedError\n"
    path = tmp_path / "lesson5.py"
    path.write_text(source, encoding="utf-8")
    return path


def test_a_replay_with_decide_release_still_a_stub_gives_its_figures_and_no_decision(tmp_path):
    """A learner with qualify written and decide_release not yet lost `sheet run --baseline`
    to 'grader: lesson5 decide_release: NotImplementedError', after every run was made."""
    sheet, bench, workload = _bench(20)
    with core.own_core(COURSE, {"lesson5": _qualify_only(tmp_path)}) as mine:
        assert mine.qualify is not None and mine.decide is None
        assert "lesson5: decide_release is not written yet: no release decision" in mine.note, mine.note
        text = replay.run_sheets(sheet, SHEET, COURSE, None, "24,25", str(SHEET), False,
                                 plot=tmp_path / "release.png", core=mine)
    assert "goodput" in text and "no release decision: lesson 5's decide_release is not written yet" in text
    assert "lesson 5's rule" not in text and (tmp_path / "release.png").stat().st_size > 1000


def test_the_goodput_experiment_with_decide_release_still_a_stub_shows_goodput_and_no_decision(tmp_path):
    import json
    from grader.course import experiments
    from grader.course.experiments.common import save_plot
    settings = ["rates=1", "rate_from=7", "seeds=2", "requests=30", "candidates=gain"]
    outcome = experiments.run("goodput", settings, COURSE, submission=str(_qualify_only(tmp_path)))
    save_plot(outcome.plot, tmp_path / "goodput.png")
    got = json.loads(json.dumps(outcome.to_dict()))
    mine = [r for r in got["rows"] if not r.get("reference")]
    assert [r["design"] for r in mine] == ["baseline", "gain"]
    assert all(r["goodput"] is not None for r in mine)
    assert mine[1]["decision"] is None and mine[1]["diff"] is not None
    assert any("decide_release is not written yet" in n for n in got["notes"]), got["notes"]
    assert (tmp_path / "goodput.png").stat().st_size > 1000


def test_a_lesson_half_written_names_the_baselines_of_what_is_missing_only(tmp_path):
    """Lesson 4 with on_event written and its keys not yet: the note described the baseline
    as 'cancellation deferred to the request's end', which is the learner's own on_event's
    job here, and said nothing of whose keys the runs used (a 'key without scope' row then
    shows no cross-scope hit, the worker's own keys being no knob's to distort)."""
    source = (ROOT / "reference" / "solutions" / "lesson4.py").read_text(encoding="utf-8")
    source += ("\n\ndef prefix_key(scope, parent_key, block_tokens):\n    raise NotImplementedError\n"
               "\n\ndef publishable(pages):\n    raise NotImplementedError\n")
    (tmp_path / "lesson4.py").write_text(source, encoding="utf-8")
    with core.own_core(COURSE, {"lesson4": tmp_path / "lesson4.py"}) as mine:
        note = mine.note
    lesson4 = next(part for part in note.split("; lesson") if part.startswith("lesson4") or part.startswith("4:"))
    assert "prefix_key, publishable not written yet" in lesson4, lesson4
    assert "cancellation deferred" not in lesson4, lesson4
    assert "the worker's own prefix keys" in lesson4 and "the worker's own publishing" in lesson4, lesson4


def _lesson5_with(tmp_path, decide_body: str, qualify_body: str | None = None):
    source = (ROOT / "reference" / "solutions" / "lesson5.py").read_text(encoding="utf-8")
    source += f"\n\ndef decide_release(baseline_runs, candidate_runs, rule):\n    {decide_body}\n"
    if qualify_body:
        source += f"\n\ndef qualify(record, slo=None):\n    {qualify_body}\n"
    path = tmp_path / "my_lesson5.py"
    path.write_text(source, encoding="utf-8")
    return path


GOODPUT_SMALL = ["rates=1", "rate_from=7", "seeds=2", "requests=30", "candidates=gain"]


@pytest.mark.parametrize("decide,qualify,said", [
    # A decision the course does not have was printed and drawn as one.
    ("return ReleaseDecision('yolo', ('fine',))", None,
     "my_lesson5.py: decide_release: ReleaseDecision.decision: 'yolo' is not one of ship, rollback, inconclusive"),
    ("raise RuntimeError('nope')", None, "my_lesson5.py: decide_release: RuntimeError: nope"),
    # The file is named, not only the lesson.
    ("return ReleaseDecision('ship')", "return True",
     "my_lesson5.py: qualify: gave no verdict for r0 (returned bool True, not one of good"),
])
def test_a_lesson5_answer_the_figures_cannot_use_stops_in_one_line_naming_the_file(tmp_path, decide, qualify, said):
    from grader.course import experiments
    from grader.engine.errors import InputError
    with pytest.raises(InputError) as e:
        experiments.run("goodput", GOODPUT_SMALL, COURSE,
                        submission=str(_lesson5_with(tmp_path, decide, qualify)))
    assert said in str(e.value), str(e.value)


def test_a_lesson5_decisions_reasons_reach_the_notes_as_one_printable_line(tmp_path):
    """Reasons are learner text: an escape sequence cleared the terminal the experiment printed on."""
    from grader.course import experiments
    path = _lesson5_with(tmp_path, "return ReleaseDecision('ship', ('\\x1b[2J' * 3 + 'looks\\nfine',))")
    outcome = experiments.run("goodput", GOODPUT_SMALL, COURSE, submission=str(path))
    said = [n for n in outcome.notes if "looks fine" in n]
    assert said and all("\x1b" not in n and "\n" not in n for n in outcome.notes), outcome.notes

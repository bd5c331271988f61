"""The experiments with a learner's functions plugged in (--submission): the learner's rows
beside the reference's, the strawmen as knob distortions of the learner's own core, a stub
that says it is not implemented, and --help that lists every experiment and setting."""

import json

import pytest

from conftest import ROOT, run_grader
from grader.course import experiments
from grader.course.experiments.plugged import REFERENCE_PREFIX
from grader.engine.layout import find_course

COURSE = find_course(str(ROOT))
SOLUTIONS = ROOT / "reference" / "solutions"
# Small settings: each call of a learner's function crosses to its sandbox.
SMALL = {
    "prefill-deadline": ["prompts=2", "chunks=256,512"],
    "prefix-ownership": ["requests=60", "variants=no_scope,at_cancel", "cancel_rates=0"],
    "goodput": ["rates=2", "seeds=2", "requests=30"],
}
LESSON = {"prefill-deadline": "lesson3", "prefix-ownership": "lesson4", "goodput": "lesson5"}
KEY = {"prefill-deadline": "rule", "prefix-ownership": "variant", "goodput": "design"}


def core_rows(rows, key):
    """The rows a core's functions give (prefill-deadline's fixed chunks replace any rule)."""
    return [r for r in rows if not r[key].startswith("fixed ")]


def plain_rows(outcome):
    return json.loads(json.dumps(outcome.to_dict()))["rows"]


def split(rows, key):
    """(the plugged-in core's rows, the reference's rows named as the course names them)."""
    mine = [r for r in rows if not r[key].startswith(REFERENCE_PREFIX)]
    ref = [{k: (v.removeprefix(REFERENCE_PREFIX) if k == key else v) for k, v in r.items() if k != "reference"}
           for r in rows if r[key].startswith(REFERENCE_PREFIX)]
    return mine, ref


@pytest.fixture(scope="module")
def course_rows():
    """Each experiment's rows in the course, on the reference (the instructor's view)."""
    return {name: plain_rows(experiments.run(name, SMALL[name], COURSE)) for name in SMALL}


@pytest.mark.parametrize("name", sorted(SMALL))
def test_the_reference_handed_in_gives_the_reference_rows_and_the_reference_beside_them(name, course_rows):
    path = SOLUTIONS / f"{LESSON[name]}.py"
    outcome = experiments.run(name, SMALL[name], COURSE, submission=str(path))
    mine, ref = split(plain_rows(outcome), KEY[name])
    want = course_rows[name]
    assert mine == want and ref == core_rows(want, KEY[name])
    assert any(f"from {path}" in n for n in outcome.notes)
    assert any(n.startswith(f"rows {REFERENCE_PREFIX}") for n in outcome.notes)


@pytest.mark.parametrize("name", sorted(SMALL))
def test_the_stub_is_not_implemented_beside_the_reference(name, course_rows, tmp_path):
    stub = ROOT / "assignments" / LESSON[name] / "exercise.py"
    outcome = experiments.run(name, SMALL[name], COURSE, submission=str(stub))
    key = KEY[name]
    rows = plain_rows(outcome)
    missing = [r for r in rows if r.get("missing")]
    assert missing and all(r[key].endswith(": not implemented") for r in missing)
    assert all(v is None for r in missing for k, v in r.items() if k not in (key, "missing"))
    _, ref = split(rows, key)
    # The reference's rows of every variant the learner's would have had.
    assert ref == core_rows(course_rows[name], key)
    labels = [r[key] for r in ref]
    if name == "prefill-deadline":          # the strawmen need no lesson function
        assert [r[key] for r in rows if r.get("chunk")] == ["fixed 256", "fixed 512"]
    # One row per variant the learner's functions would have given (goodput: per design).
    theirs = list(dict.fromkeys(labels))
    assert [r[key] for r in missing] == [f"{label}: not implemented" for label in theirs]
    assert "not implemented" in outcome.render()
    assert any("not written yet (the stub raises NotImplementedError)" in n for n in outcome.notes)
    from grader.course.plots import save_plot
    assert save_plot(outcome.plot, tmp_path / "stub.png").stat().st_size > 1000


def test_a_learners_rule_is_the_one_the_rows_measure_and_the_knob_distorts(tmp_path):
    """A choose_chunk that always prefills 256 tokens: its rows are the fixed 256 row, as it
    is and under the per-token-only knob (which distorts what it is asked, not a fixed rule)."""
    path = tmp_path / "fixed256.py"
    path.write_text("from reference.shapes import ChunkPlan\n\n\ndef choose_chunk(ctx):\n"
                    "    return ChunkPlan(min(256, ctx.prefill_remaining), 'ok')\n")
    outcome = experiments.run("prefill-deadline", SMALL["prefill-deadline"], COURSE, submission=str(path))
    rows = {r["rule"]: r for r in plain_rows(outcome)}
    same = lambda r: {k: v for k, v in r.items() if k not in ("rule", "chunk")}
    assert same(rows["budget"]) == same(rows["fixed 256"]) == same(rows["per_token_only"])
    assert same(rows[REFERENCE_PREFIX + "budget"]) != same(rows["budget"])


def test_a_learners_key_without_scope_shows_in_its_own_design_row(tmp_path):
    """Lesson 4's reference with a prefix_key that drops the scope: the learner's design row
    has cross-scope hits and an open probe, the reference's beside it has none."""
    path = tmp_path / "noscope.py"
    path.write_text((SOLUTIONS / "lesson4.py").read_text() + "\n\n_keyed = prefix_key\n\n\n"
                    "def prefix_key(scope, parent_key, block_tokens):\n"
                    "    return _keyed('', parent_key, block_tokens)\n")
    settings = ["requests=60", "variants=no_scope", "cancel_rates=0"]
    rows = {r["variant"]: r for r in plain_rows(experiments.run("prefix-ownership", settings, COURSE,
                                                                submission=str(path)))}
    design, ref = rows["design: at the fence"], rows[REFERENCE_PREFIX + "design: at the fence"]
    assert design["cross_scope"] > 0 and design["probe_gap_ms"] > 0
    assert ref["cross_scope"] == 0 and ref["probe_gap_ms"] == 0


def test_a_learners_release_rule_decides_its_rows(tmp_path):
    """Lesson 5's reference qualify with a decide_release that always ships: the same goodput
    as the reference's rows, and every candidate shipped."""
    path = tmp_path / "ship.py"
    path.write_text((SOLUTIONS / "lesson5.py").read_text() + "\n\n"
                    "def decide_release(baseline_runs, candidate_runs, rule):\n"
                    "    return ReleaseDecision('ship', ('always',))\n")
    rows = plain_rows(experiments.run("goodput", SMALL["goodput"], COURSE, submission=str(path)))
    mine, ref = split(rows, "design")
    assert [r["goodput"] for r in mine] == [r["goodput"] for r in ref]
    assert {r["decision"] for r in mine if r["design"] != "baseline"} == {"ship"}
    assert {r["decision"] for r in ref if r["design"] != "baseline"} != {"ship"}


def test_the_command_line_takes_a_submission_and_refuses_a_missing_one(tmp_path):
    stub = ROOT / "assignments" / "lesson3" / "exercise.py"
    code, out, err = run_grader("experiment", "prefill-deadline", "--set", "prompts=2", "--set", "chunks=512",
                                "--submission", str(stub), "--plot", str(tmp_path / "d.png"))
    assert code == 0, err
    assert "budget: not implemented" in out and "reference: budget" in out and "Traceback" not in err
    assert (tmp_path / "d.png").stat().st_size > 1000
    code, out, err = run_grader("experiment", "goodput", "--submission", str(tmp_path / "nope.py"))
    assert code == 2 and out == "" and err.count("\n") == 1 and "nope.py" in err and "no such file" in err


def test_help_lists_every_experiment_and_setting():
    code, out, err = run_grader("experiment", "--help")
    assert code == 0, err
    text = " ".join(out.split())
    for name in experiments.names():
        exp = experiments.find(name)
        assert f"{name} ({exp.lesson}): {exp.title}" in text
        for knob in exp.knobs:
            assert f"{knob.name} (default " in text, (name, knob.name)
    assert "--submission" in out


def test_the_reference_rows_come_from_the_record_for_the_recorded_settings_only(monkeypatch):
    """As in the learner edition: the reference's rows recorded at some settings are shown at
    those settings; at others, or once a course file they read changed, a note says they
    are not available, and the learner's rows stand alone."""
    from grader.course.experiments import plugged
    from grader.engine import oracle
    settings = SMALL["prefill-deadline"]
    with oracle.recording() as record:
        want = plain_rows(experiments.run("prefill-deadline", settings, COURSE))
    assert list(record) == ["figures-experiment-prefill-deadline"]
    monkeypatch.setattr(plugged, "has_solution", lambda lesson: False)        # no solution here
    monkeypatch.setattr(oracle, "_tables", dict(record))
    path = str(SOLUTIONS / "lesson3.py")
    outcome = experiments.run("prefill-deadline", settings, COURSE, submission=path)
    mine, ref = split(plain_rows(outcome), "rule")
    assert mine == want and ref == core_rows(want, "rule")
    assert any("recorded when this edition was built" in n for n in outcome.notes)
    other = experiments.run("prefill-deadline", settings + ["budget=0.08"], COURSE, submission=path)
    assert not any(r.get("reference") for r in other.table.rows)
    assert any("not available for these settings" in n for n in other.notes)
    monkeypatch.setattr(plugged, "_inputs", lambda course, lesson: {"worker.yaml": "edited"})
    edited = experiments.run("prefill-deadline", settings, COURSE, submission=path)
    assert not any(r.get("reference") for r in edited.table.rows)


def test_a_file_that_does_not_load_says_why(tmp_path):
    path = tmp_path / "broken.py"
    path.write_text("def choose_chunk(ctx):\n    return (\n")
    outcome = experiments.run("prefill-deadline", SMALL["prefill-deadline"], COURSE, submission=str(path))
    assert [r["rule"] for r in outcome.table.rows if r.get("missing")] == [
        "budget: not implemented", "per_token_only: not implemented"]
    assert any(f"not implemented: {path} did not load (" in n for n in outcome.notes), outcome.notes


def test_category_labels_of_a_bar_panel_never_run_into_each_other(tmp_path, monkeypatch):
    """With a learner's rows beside the reference's, a bar panel's categories get long
    ("reference: key without scope"): drawn side by side, no two labels may overlap."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from grader.course.plots import Bars, Panel, Plot, save_plot
    drawn, close = [], plt.close
    monkeypatch.setattr(plt, "close", drawn.append)
    names = ("design: at the fence", "key without scope", f"{REFERENCE_PREFIX}design: at the fence",
             f"{REFERENCE_PREFIX}key without scope", f"{REFERENCE_PREFIX}publish unwritten pages")
    bars = Bars(names, (("right", (1.0,) * 5), ("wrong", (2.0,) * 5)))
    save_plot(Plot("t", "", (Panel("ms", bars=bars),)), tmp_path / "bars.png")
    [fig] = drawn
    renderer = fig.canvas.get_renderer()
    boxes = sorted((t.get_window_extent(renderer) for t in fig.axes[0].get_xticklabels()), key=lambda b: b.x0)
    assert len(boxes) == 5
    assert all(left.x1 < right.x0 for left, right in zip(boxes, boxes[1:]))
    close(fig)


@pytest.mark.parametrize("name", ["prefill-deadline", "prefix-ownership"])
def test_another_lessons_file_is_named_as_such_not_as_a_stub(name):
    """lesson 1's exercise handed to an experiment about lesson 3 or 4 defines none of its
    functions: the note says so, and asks whether it is the right file."""
    other = ROOT / "assignments" / "lesson1" / "exercise.py"
    outcome = experiments.run(name, SMALL[name], COURSE, submission=str(other))
    wanted = {"prefill-deadline": "choose_chunk", "prefix-ownership": "on_event, prefix_key, publishable"}[name]
    assert any(f"{other} defines no {wanted}: is it your {LESSON[name]} exercise file?" in n
               for n in outcome.notes), outcome.notes
    assert not any("the stub raises NotImplementedError" in n for n in outcome.notes)


@pytest.mark.parametrize("name", sorted(SMALL))
def test_every_worker_run_an_experiment_makes_is_counted_for_its_progress(name):
    """grader experiment shows a count of worker runs once a run takes a few seconds: each
    experiment reports every run it makes, once."""
    from grader.course.experiments.common import parse_settings
    from grader.course.experiments.plugged import Sides, plugged
    exp = experiments.find(name)
    settings = parse_settings(name, exp.knobs, SMALL[name])
    counted = []
    with plugged(COURSE, exp.lesson, None) as chosen:          # the reference: one side computed
        exp.run(settings, COURSE, Sides(name, settings, COURSE, chosen, ran=counted.append))
    expected = {
        # each fixed chunk and each rule: one run
        "prefill-deadline": lambda: len(set(settings["chunks"])) + len(settings["rules"]),
        # the design, each variant, each other cancel rate; the probes of the design and no_scope
        "prefix-ownership": lambda: 1 + 2 + 1 + 2,
        # every design (the baseline and each candidate) at every rate, on every seed
        "goodput": lambda: settings["rates"] * (1 + len(settings["candidates"])) * settings["seeds"],
    }[name]()
    assert sum(counted) == expected, counted


@pytest.mark.parametrize("answer,usable", [("(16, 'ok')", False),
                                           ("ChunkPlan(16, 'ok') if ctx.prefill_done else (16, 'ok')", True)])
def test_a_rule_that_answered_no_call_has_no_rows_of_its_own(tmp_path, answer, usable):
    """A choose_chunk that returns a tuple: every chunk was the worker's fallback's, and its
    rows read as a rule that never missed the budget. Rows are a rule's only when some call
    of it gave a usable answer; otherwise they say so, as a stub's say it is not written."""
    path = tmp_path / "mine.py"
    path.write_text(f"from reference.shapes import ChunkPlan\n\n\ndef choose_chunk(ctx):\n    return {answer}\n")
    outcome = experiments.run("prefill-deadline", SMALL["prefill-deadline"], COURSE, submission=str(path))
    rows = plain_rows(outcome)
    mine = [r for r in rows if not r["rule"].startswith(("fixed ", REFERENCE_PREFIX))]
    assert [r["rule"] for r in mine] == (["budget", "per_token_only"] if usable else
                                         ["budget: no usable answer", "per_token_only: no usable answer"])
    assert all(r.get("missing") for r in mine) is not usable
    said = " ".join(outcome.notes)
    assert ("gave no usable answer on any call" in said) is not usable
    assert ("your functions failed on some calls" in said) is usable


@pytest.mark.parametrize("name,functions,refused", [
    ("prefill-deadline", "def choose_chunk(ctx):\n    return ChunkPlan(10**9, 'ok')\n",
     "choose_chunk returned ChunkPlan(tokens=1000000000, verdict='ok')"),
    ("prefill-deadline", "def choose_chunk(ctx):\n    return ChunkPlan(-5, 'whatever')\n",
     "choose_chunk returned ChunkPlan(tokens=-5, verdict='whatever')"),
    ("prefix-ownership", "def on_event(state, event, step_in_flight):\n    return Transition('gone')\n",
     "returned Transition(next_state='gone', actions=()); treated as no change"),
])
def test_answers_the_worker_refused_are_named_not_shown_as_the_rule(tmp_path, name, functions, refused):
    """An answer of the right type the worker cannot use (a chunk of a billion tokens, a state
    the machine does not have) passes the sandbox's checks: the worker took its fallback on
    every call, and the rows read as a rule of 64-token chunks that never missed its budget,
    with no note at all."""
    path = tmp_path / "mine.py"
    path.write_text(f"from reference.shapes import ChunkPlan, Transition\n\n\n{functions}")
    outcome = experiments.run(name, SMALL[name], COURSE, submission=str(path))
    said = [n for n in outcome.notes if n.startswith("the worker could not use some of your answers")]
    assert len(said) == 1 and refused in said[0] and "invalid decisions recorded" in said[0], outcome.notes
    assert said[0] in outcome.plot.warnings
    # The reference beside it, and a call that failed outright (the call log's to count), say nothing so.
    assert not any("could not use" in n for n in outcome.notes if n.startswith(REFERENCE_PREFIX))


def test_a_call_that_failed_is_counted_once_not_as_refused_too(tmp_path):
    path = tmp_path / "mine.py"
    path.write_text("from reference.shapes import ChunkPlan\n\nCALLS = [0]\n\n\ndef choose_chunk(ctx):\n"
                    "    CALLS[0] += 1\n    if CALLS[0] % 2:\n        raise ValueError('odd')\n"
                    "    return ChunkPlan(min(ctx.page_tokens, ctx.prefill_remaining), 'ok')\n")
    outcome = experiments.run("prefill-deadline", SMALL["prefill-deadline"], COURSE, submission=str(path))
    said = " ".join(outcome.notes)
    assert "your functions failed on some calls" in said and "could not use" not in said


def test_a_lesson_written_in_part_is_a_warning_on_the_plot(tmp_path):
    """A lesson 4 file with prefix_key alone written: the baseline's on_event defers every
    cancel to the request's end, so the 'release at cancel' strawman drawn on it showed no
    use-after-free, and only the printed notes said whose on_event it was."""
    path = tmp_path / "mine.py"
    path.write_text("def prefix_key(scope, parent_key, block_tokens):\n"
                    "    return scope + '/' + parent_key + '/' + ','.join(map(str, block_tokens))\n")
    outcome = experiments.run("prefix-ownership", SMALL["prefix-ownership"], COURSE, submission=str(path))
    partly = [n for n in outcome.notes if n.startswith("your rows are partly the course baseline's: lesson4: ")]
    assert len(partly) == 1 and "on_event, publishable not defined in mine.py" in partly[0], outcome.notes
    assert partly[0] in outcome.plot.warnings
    # Every lesson written: no such warning.
    whole = experiments.run("prefix-ownership", SMALL["prefix-ownership"], COURSE,
                            submission=str(SOLUTIONS / "lesson4.py"))
    assert not any("partly the course baseline" in n for n in whole.notes + whole.plot.warnings)

"""A run that stops early says so wherever it is summarised, and goodput's window on a burst.

A run stops early at the step cap or when it is stuck (reference/worker/engine.py); the
worker lists its unfinished requests and records them as failed. Every summary (``grader
sheet run``, the experiments' notes, an incident bundle, the judgement of a fixed sheet)
states the truncation, because gaps and TPOT of the part that ran can look healthy while
nothing completed. The runs here are cut short by a step cap passed to the worker.
"""
from __future__ import annotations

import json
from collections import OrderedDict
from functools import partial

import numpy as np
import pytest
import yaml

from conftest import ROOT
from grader.cli import main
from grader.course import experiments, trials
from grader.course.bundle import write_bundle
from grader.course.incident import demo_incident, judge_fix, reference_sheet
from grader.course.trials import truncation, window_of
from grader.engine import memo
from grader.engine.layout import find_course
from grader.engine.oracle import reference_policy
from reference.solutions import lesson5 as oracle
from reference.worker import simulate
from worker_helpers import LOOSE, machine, request

COURSE = find_course(str(ROOT))
TEMPLATE = ROOT / "assignments" / "design_sheet.yaml"
CAP = 60


@pytest.fixture
def capped(monkeypatch):
    """Every run of the course machinery stops after CAP steps, with fresh run and figure
    caches (a figure kept from an uncapped run would hide the cap) and no figure on disk."""
    monkeypatch.setattr(trials, "simulate", partial(simulate, max_steps=CAP))
    monkeypatch.setattr(trials, "_RUNS", OrderedDict())
    monkeypatch.setattr(memo, "_memory", {})
    monkeypatch.setenv("GRADER_CACHE", "off")


# ---- the run ------------------------------------------------------------------------------------
def test_a_truncated_run_lists_its_unfinished_requests_as_failed():
    model, worker = machine(100)
    reqs = tuple(request(i, 0.01 * i, 40, 200) for i in range(6))
    run = simulate(model, worker, reference_policy(), reqs, max_steps=CAP)
    assert len(run.steps) == CAP and run.aborted.startswith("stopped at the step cap")
    unfinished = [r for r in run.requests if r.outcome != "completed"]
    assert run.unfinished == tuple(r.id for r in unfinished) and len(unfinished) == 6
    assert all(r.outcome == "failed" and r.reason.startswith("unfinished (") for r in unfinished)
    assert all(oracle.qualify(r) == "failed" for r in unfinished)
    assert truncation(run) == (f"truncated: {run.aborted}; 6 of 6 requests unfinished, counted "
                               "as failed")
    finished = simulate(model, worker, reference_policy(), reqs)
    assert truncation(finished) == "" and finished.unfinished == ()


def test_requests_that_had_not_arrived_when_the_run_stopped_are_unfinished_too():
    model, worker = machine(100)
    reqs = (request(0, 0.0, 40, 200), request(1, 50.0, 40, 2))
    run = simulate(model, worker, reference_policy(), reqs, max_steps=CAP)
    late = run.requests[1]
    assert run.unfinished == ("r0", "r1") and late.outcome == "failed"
    assert late.reason.startswith("unfinished (not arrived when the run stopped)")
    assert oracle.qualify(late) == "failed"


# ---- grader sheet run -------------------------------------------------------------------------
def test_sheet_run_states_the_truncation_and_counts_the_unfinished_as_failed(capped, capsys):
    assert main(["sheet", "run", str(TEMPLATE), "--seeds", "4"]) == 0
    text = capsys.readouterr().out
    assert main(["sheet", "run", str(TEMPLATE), "--seeds", "4", "--json"]) == 0
    f = json.loads(capsys.readouterr().out)["figures"]
    requests, run = trials._RUNS[next(iter(trials._RUNS))]
    assert run.aborted and len(run.unfinished) > 0
    completed = sum(r.outcome == "completed" for r in run.requests)
    assert (f["requests"], f["completed"]) == (len(requests), completed)
    assert f["truncated"] == [{"seed": 4, "why": truncation(run), "unfinished": len(run.unfinished)}]
    assert f"TRUNCATED, seed 4: truncated: stopped at the step cap, {CAP} steps" in text
    assert f"completed {completed} of {len(requests)} requests" in text
    # Unfinished requests are failed in the class counts, and goodput is good / window.
    failed = sum(c["failed"] for c in f["classes"].values())
    assert failed >= len(run.unfinished)
    good = sum(c["good"] for c in f["classes"].values())
    assert f["goodput_rps"] == round(good / window_of(requests), 4)


def test_sheet_run_plot_of_a_truncated_run_warns(capped, tmp_path, monkeypatch):
    from grader.course import plots
    seen, real = [], plots.save_plot
    monkeypatch.setattr(plots, "save_plot", lambda plot, path: seen.append(plot) or real(plot, path))
    assert main(["sheet", "run", str(TEMPLATE), "--seeds", "4", "--plot", str(tmp_path / "r.png")]) == 0
    (plot,) = seen
    assert plot.warnings and plot.warnings[0].startswith(
        f"design_sheet.yaml, seed 4: truncated: stopped at the step cap, {CAP} steps")


def test_sheet_run_of_a_finished_run_says_nothing_of_truncation(capsys):
    assert main(["sheet", "run", str(TEMPLATE), "--seeds", "4", "--json"]) == 0
    f = json.loads(capsys.readouterr().out)["figures"]
    assert f["truncated"] == [] and f["completed"] > 0


# ---- the experiments ---------------------------------------------------------------------------
SMALL = {
    "prefill-deadline": ["prompts=2", "chunks=512", "rules=budget"],
    "prefix-ownership": ["requests=40", "variants=at_cancel", "cancel_rates=0"],
    "goodput": ["rates=1", "seeds=2", "requests=20"],
}


@pytest.mark.parametrize("name", sorted(SMALL))
def test_each_experiment_notes_a_truncated_run(name, capped, monkeypatch):
    module = experiments.find(name).run.__module__
    monkeypatch.setattr(f"{module}.simulate", partial(simulate, max_steps=CAP), raising=False)
    outcome = experiments.run(name, SMALL[name], COURSE)
    stopped = [n for n in outcome.notes if f"truncated: stopped at the step cap, {CAP} steps" in n]
    assert stopped, outcome.notes
    assert "counted as failed" in stopped[0]
    assert outcome.plot.warnings and all("truncated: " in w for w in outcome.plot.warnings)


# ---- lesson 6 -----------------------------------------------------------------------------------
def test_an_incident_bundle_and_a_fix_judged_on_truncated_runs_say_so(capped, tmp_path):
    incident = demo_incident(COURSE)
    write_bundle(incident, tmp_path / "b")
    readme = (tmp_path / "b" / "README.md").read_text()
    assert "**The evidence run did not finish.**" in readme and f"{CAP} steps" in readme
    meta = yaml.safe_load((tmp_path / "b" / "incident.yaml").read_text())
    assert meta["truncated"].startswith("truncated: stopped at the step cap")
    report = yaml.safe_load((tmp_path / "b" / "evidence" / "release_report.yaml").read_text())
    assert set(report["truncated"]) == {"R41", "R42"}
    assert sorted(report["truncated"]["R42"]) == list(incident.report_seeds)
    verdict = judge_fix(incident, reference_sheet(incident))
    assert not verdict.passed
    assert [p for p in verdict.problems if p.startswith("your sheet's run on seed ")
            and " is truncated: " in p]


# ---- goodput's window -----------------------------------------------------------------------------
def burst(ttft: float):
    slo = type(LOOSE)(ttft_s=ttft, gap_s=1000.0)
    return tuple(request(i, 0.002 * i, 40, 4, slo=slo) for i in range(5))


def test_a_burst_is_counted_over_its_longest_first_token_deadline():
    reqs = burst(1.5)
    assert max(r.arrival_s for r in reqs) == pytest.approx(0.008)
    assert window_of(reqs) == 1.5
    model, worker = machine(100)
    run = simulate(model, worker, reference_policy(), reqs)
    assert all(oracle.qualify(r) == "good" for r in run.requests)
    assert oracle.goodput(run.requests, None, window_of(reqs)) == pytest.approx(5 / 1.5)


def test_the_window_is_the_last_arrival_once_arrivals_outlast_every_deadline():
    spec = trials.public_suites(COURSE)[0].trials[0].workload
    for seed in range(spec.seed, spec.seed + 4):
        reqs = trials.generate(spec, seed)
        last = float(np.max([r.arrival_s for r in reqs]))
        assert last > max(c.ttft_s for c in spec.classes)
        assert window_of(reqs) == last
    assert window_of(()) == 1.0

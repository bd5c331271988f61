"""The prefix ownership experiment: each ownership mistake shows in its own column."""

import re

import pytest

from conftest import ROOT, run_grader
from experiment_helpers import COURSE, assert_saved_png, default_fixtures
from grader.course import experiments
from grader.course.experiments import prefix_ownership
from grader.course.scenario import load_scenario
from reference.shapes import CostModel


def run_cli(*args):
    return run_grader("experiment", *args)


default_outcome, default_run = default_fixtures("prefix-ownership", "ownership.png")


def test_each_mistake_shows_in_its_column_and_the_design_in_none(default_run):
    data, _ = default_run
    rows = {r["variant"]: r for r in data["rows"]}
    faults = ("use_after_free", "leaks", "cross_scope", "wrong_prefix", "poisoned")
    design = rows["design: at the fence"]
    for label, row in rows.items():
        if label.startswith("design"):
            assert all(row[k] == 0 for k in faults), row
    shows = {"release at cancel": "use_after_free", "never release": "leaks",
             "key without scope": "cross_scope", "key without parent": "wrong_prefix",
             "publish partial pages": "poisoned", "publish unwritten pages": "poisoned"}
    for label, column in shows.items():
        row = rows[label]
        assert row[column] > 0, (label, row)
        assert all(row[k] == 0 for k in faults if k != column), (label, row)
    # Releasing at the fence waits for the in-flight step; at cancel does not wait (and is unsafe).
    assert design["reclaim_p50_ms"] > 0 and rows["release at cancel"]["reclaim_max_ms"] == 0
    assert rows["never release"]["reclaim_p50_ms"] is None
    assert rows["never release"]["held_page_s"] > 100 * design["held_page_s"]
    # A key without scope shares more, across tenants.
    assert rows["key without scope"]["hit_rate"] > design["hit_rate"]
    assert [rows[f"design, {p}% cancelled"]["cancel_pct"] for p in (0, 20, 60, 80)] == [0, 20, 60, 80]
    assert "synthetic" in data["cost_model"]


def test_plot_is_a_png(default_run):
    assert_saved_png(*default_run)


def test_plot_draws_each_variants_failure_and_nothing_for_the_design(default_outcome):
    outcome, _ = default_outcome
    rows = {r["variant"]: r for r in outcome.table.rows}
    failures, probe = outcome.plot.panels
    bars = failures.bars
    assert bars.categories == tuple(rows) and bars.log
    kinds = [name for name, _ in bars.series]
    assert kinds == ["use-after-free", "cross-scope hits", "wrong-position hits", "poisoned publishes",
                     "leaked pages"]
    keys = dict(zip(kinds, ("use_after_free", "cross_scope", "wrong_prefix", "poisoned", "leaked_pages")))
    drawn = {}
    for c, k, value in bars.drawn():
        drawn.setdefault(bars.categories[c], {})[kinds[k]] = value
    # Every bar is the table's number; every variant draws its own failure, the design none.
    for label, row in rows.items():
        assert drawn.get(label, {}) == {kind: row[keys[kind]] for kind in kinds if row[keys[kind]]}
    expect = {"release at cancel": "use-after-free", "never release": "leaked pages",
              "key without scope": "cross-scope hits", "key without parent": "wrong-position hits",
              "publish partial pages": "poisoned publishes", "publish unwritten pages": "poisoned publishes"}
    assert {label: set(d) for label, d in drawn.items()} == {label: {k} for label, k in expect.items()}
    assert drawn["release at cancel"]["use-after-free"] == 16        # visible beside 2,701 pages
    assert all(bars.empty[i].startswith("none") for i, label in enumerate(bars.categories)
               if label.startswith("design"))
    # The leak is drawn as the pages the leaked requests still held.
    assert rows["never release"]["leaked_pages"] > rows["never release"]["leaks"] > 0
    assert probe.bars.categories == ("design: at the fence", "key without scope")


def _prefill_s(cost: CostModel, tokens: int, done: int, chunk: int) -> float:
    """An idle worker's time to first token: the prompt's chunks after ``done`` hit tokens."""
    total, at = 0.0, done
    while at < tokens:
        c = min(chunk, tokens - at)
        total += cost.step_time((), c, at)
        at += c
    return total


def test_the_probe_measures_the_side_channel_of_a_key_without_scope(default_outcome):
    """TTFTs computed from the cost model alone: on an idle worker a miss prefills the whole
    prompt in 40-token chunks; a hit on the other tenant's pages prefills only its last block."""
    outcome, _ = default_outcome
    probe = outcome.plot.panels[1].bars
    (right_name, right), (wrong_name, wrong) = probe.series
    assert right_name.startswith("guess right") and wrong_name.startswith("guess wrong")
    scenario = load_scenario(ROOT / "assignments" / "lesson4" / "public" / "cancel-prefix.scenario.yaml",
                             COURSE)
    cost, pt = scenario.worker.cost, scenario.worker.page_tokens
    # The workload's system prompts: acme and globex have two of 96 tokens, initech one of 64.
    lengths = sorted(len(p) for _, p in prefix_ownership.system_prompts(scenario.requests(), pt))
    assert lengths == [64, 96, 96, 96, 96]
    tail = prefix_ownership.PROBE_TAIL
    miss = sum(_prefill_s(cost, n + tail, 0, 40) for n in lengths) / len(lengths) * 1000
    hit = sum(_prefill_s(cost, n + tail, n, 40) for n in lengths) / len(lengths) * 1000
    assert right[0] == pytest.approx(miss) and wrong[0] == pytest.approx(miss)     # the design
    assert right[1] == pytest.approx(hit) and wrong[1] == pytest.approx(miss)      # without scope
    rows = {r["variant"]: r for r in outcome.table.rows}
    assert rows["design: at the fence"]["probe_gap_ms"] == pytest.approx(0.0, abs=1e-9)
    assert rows["key without scope"]["probe_gap_ms"] == pytest.approx(miss - hit)
    readme = " ".join((ROOT / "assignments" / "lesson4" / "README.md").read_text().split())
    assert (f"both take {miss:.2f} ms to a first token" in readme
            and f"answers in {hit:.2f} ms: a {miss - hit:.2f} ms gap" in readme)


def test_the_table_fits_100_columns(default_outcome):
    outcome, _ = default_outcome
    text = outcome.table.render()
    assert max(len(line) for line in text.splitlines()) <= 100
    assert text.count("  variant ") == 2                      # wrapped: what breaks, what it costs


def test_readme_shows_the_default_table():
    """The lesson's numbers are computed: the README's table is this experiment's output."""
    code, out, err = run_cli("prefix-ownership")
    assert code == 0, err
    readme = (ROOT / "assignments" / "lesson4" / "README.md").read_text()
    rows = [line for line in out.splitlines()
            if line.startswith(("  design", "  release", "  never", "  key", "  publish"))]
    assert len(rows) == 22                 # 11 variants, in each of the table's two blocks
    for line in rows:
        assert line in readme, line


def test_set_changes_one_constraint():
    outcome = experiments.run("prefix-ownership", ["requests=120", "variants=no_scope",
                                                   "cancel_rates=0", "repeat=0"], COURSE)
    rows = {r["variant"]: r for r in outcome.table.rows}
    assert set(rows) == {"design: at the fence", "key without scope", "design, 0% cancelled"}
    assert rows["key without scope"]["cross_scope"] > 0
    assert rows["design, 0% cancelled"]["cancelled"] == 0
    assert "requests=120" in outcome.render()
    # The plot shows the one variant's failure beside the design's none, and the probe.
    failures, probe = outcome.plot.panels
    assert failures.bars.categories == tuple(rows)
    assert [(failures.bars.categories[c], v) for c, _, v in failures.bars.drawn()] == [
        ("key without scope", rows["key without scope"]["cross_scope"])]
    assert rows["key without scope"]["probe_gap_ms"] > 0 == rows["design: at the fence"]["probe_gap_ms"]


def test_without_the_scope_variant_the_plot_has_no_probe_and_says_why():
    outcome = experiments.run("prefix-ownership", ["requests=60", "variants=at_cancel", "cancel_rates=0"],
                              COURSE)
    assert len(outcome.plot.panels) == 2
    assert outcome.plot.panels[1].bars.categories == ("design: at the fence",)
    assert any("add the no_scope variant to see it open" in n for n in outcome.notes)


@pytest.mark.parametrize("args,needle", [
    (("prefix-ownership", "--set", "variants=at_cancel,magic"), "'magic' is not one of"),
    (("prefix-ownership", "--set", "cancel=1.5"), "--set cancel=1.5: cancel: must be <= 1, got 1.5"),
    (("prefix-ownership", "--set", "cancel_rates=0,101"), "cancel_rates: must be <= 100, got 101"),
    (("prefix-ownership", "--set", "repeat=101"), "repeat: must be <= 100, got 101"),
    (("prefix-ownership", "--set", "requests=20001"), "requests: must be <= 20000, got 20001"),
    (("prefix-ownership", "--set", "chunk=0"), "must be >= 1"),
])
def test_input_errors_exit_2_with_one_line(args, needle):
    code, out, err = run_cli(*args)
    assert code == 2, (out, err)
    assert needle in err and err.count("\n") == 1 and out == ""


def test_registered():
    assert "prefix-ownership" in experiments.names()


def test_the_pages_say_how_the_experiments_workload_differs_from_the_public_scenario():
    """The lesson's README called the experiment's workload (300 requests, 20% repeating)
    the lesson's public workload, which has 200 requests and no repeats."""
    public = load_scenario(COURSE.root.joinpath("assignments", *prefix_ownership.SCENARIO), COURSE).workload.requests
    knobs = {k.name: k.default for k in prefix_ownership.KNOBS}
    said = f"{knobs['requests']} requests instead of its {public}"
    assert public != knobs["requests"]
    for page in ("assignments/lesson4/README.md", "docs/experiments.md"):
        text = " ".join((ROOT / page).read_text(encoding="utf-8").split())
        assert said in text and f"{knobs['repeat']}% of prompts repeating their first block" in text, page


def test_the_experiments_page_quotes_the_probe_as_measured(default_outcome):
    """docs/experiments.md quotes the probe's TTFTs as lesson 4's README does; nothing held
    it to the experiment's output."""
    outcome, _ = default_outcome
    gap = {r["variant"]: r for r in outcome.table.rows}["key without scope"]["probe_gap_ms"]
    readme = " ".join((ROOT / "assignments" / "lesson4" / "README.md").read_text().split())
    page = " ".join((ROOT / "docs" / "experiments.md").read_text().split())
    hit, miss = re.search(r"answers in ([\d.]+) ms: a [\d.]+ ms gap", readme).group(1), \
        re.search(r"both take ([\d.]+) ms to a first token", readme).group(1)
    assert f"answers in {hit} ms instead of {miss} ms: a {gap:.2f} ms gap" in page

"""The prefix ownership experiment: each ownership mistake shows in its own column."""

import pytest

from conftest import ROOT, experiment_run, run_grader
from grader.course import experiments
from grader.engine.layout import find_course

COURSE = find_course(str(ROOT))


def run_cli(*args):
    return run_grader("experiment", *args)


@pytest.fixture(scope="module")
def default_run(tmp_path_factory):
    return experiment_run("prefix-ownership", tmp_path_factory.mktemp("plot"), "ownership.png")


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
    data, png = default_run
    assert data["plot"] == str(png)
    blob = png.read_bytes()
    assert blob[:8] == b"\x89PNG\r\n\x1a\n" and len(blob) > 10_000


def test_readme_shows_the_default_table():
    """The lesson's numbers are computed: the README's table is this experiment's output."""
    code, out, err = run_cli("prefix-ownership")
    assert code == 0, err
    readme = (ROOT / "assignments" / "lesson4" / "README.md").read_text()
    rows = [line for line in out.splitlines()
            if line.startswith(("  design", "  release", "  never", "  key", "  publish"))]
    assert len(rows) == 11
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


@pytest.mark.parametrize("args,needle", [
    (("prefix-ownership", "--set", "variants=at_cancel,magic"), "'magic' is not one of"),
    (("prefix-ownership", "--set", "cancel=1.5"), "cancel is a share in 0..1"),
    (("prefix-ownership", "--set", "chunk=0"), "must be >= 1"),
])
def test_input_errors_exit_2_with_one_line(args, needle):
    code, out, err = run_cli(*args)
    assert code == 2, (out, err)
    assert needle in err and err.count("\n") == 1 and out == ""


def test_registered():
    assert "prefix-ownership" in experiments.names()

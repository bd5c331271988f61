"""The prefill deadline experiment: its table, its plot, its --set knobs, its errors."""

import pytest

from conftest import ROOT, experiment_run, run_grader
from grader.course import experiments
from grader.engine.layout import find_course
from grader.engine.errors import InputError
from grader.course.experiments.common import Knob, parse_settings

COURSE = find_course(str(ROOT))


def run_cli(*args):
    return run_grader("experiment", *args)


@pytest.fixture(scope="module")
def default_run(tmp_path_factory):
    return experiment_run("prefill-deadline", tmp_path_factory.mktemp("plot"), "deadline.png")


def test_table_rows_cover_every_chunk_and_rule(default_run):
    data, _ = default_run
    rows = {r["rule"]: r for r in data["rows"]}
    assert list(rows) == [f"fixed {c}" for c in (64, 128, 256, 512, 1024, 2048, 4096, 8192)] + [
        "budget", "per_token_only"]
    for row in rows.values():
        for key in ("gap_p50_ms", "gap_p99_ms", "ttft_p50_s", "ttft_p99_s", "late_gaps", "mean_chunk"):
            assert row[key] is not None, (row["rule"], key)
    budget_ms = data["settings"]["budget"] * 1000
    assert rows["budget"]["gap_p99_ms"] <= budget_ms and rows["budget"]["late_gaps"] == 0
    assert rows["per_token_only"]["late_gaps"] > 0 and rows["per_token_only"]["gap_p99_ms"] > budget_ms
    fixed = [rows[f"fixed {c}"] for c in (64, 256, 1024, 4096)]
    # The trade-off the experiment shows: bigger chunks, longer gaps and shorter TTFT.
    assert [r["gap_p99_ms"] for r in fixed] == sorted(r["gap_p99_ms"] for r in fixed)
    assert [r["ttft_p50_s"] for r in fixed] == sorted((r["ttft_p50_s"] for r in fixed), reverse=True)
    assert "synthetic" in data["cost_model"]


def test_plot_is_a_png(default_run):
    data, png = default_run
    assert data["plot"] == str(png)
    blob = png.read_bytes()
    assert blob[:8] == b"\x89PNG\r\n\x1a\n" and len(blob) > 10_000


def test_readme_shows_the_default_table(default_run):
    """The lesson's numbers are computed: the README's table is this experiment's output."""
    code, out, err = run_cli("prefill-deadline")
    assert code == 0, err
    readme = (ROOT / "assignments" / "lesson3" / "README.md").read_text()
    rows = [line for line in out.splitlines() if line.startswith(("  fixed", "  budget", "  per_token"))]
    assert len(rows) == 10
    for line in rows:
        assert line in readme, line
    assert "synthetic" in out and "gaps over budget" in out


def test_set_changes_one_constraint():
    outcome = experiments.run("prefill-deadline", ["budget=0.05", "chunks=512,2048", "rules=budget"], COURSE)
    rows = {r["rule"]: r for r in outcome.table.rows}
    assert set(rows) == {"fixed 512", "fixed 2048", "budget"}
    assert outcome.settings["budget"] == 0.05
    assert rows["budget"]["gap_p99_ms"] <= 50.0 and rows["budget"]["late_gaps"] == 0
    assert rows["fixed 2048"]["late_gaps"] > 0
    assert "budget=0.05" in outcome.render()


@pytest.mark.parametrize("args,needle", [
    (("prefill-deadline", "--set", "nope=1"), "has no setting 'nope'"),
    (("prefill-deadline", "--set", "budget=fast"), "budget: expected a number"),
    (("prefill-deadline", "--set", "budget"), "expected key=value"),
    (("prefill-deadline", "--set", "rules=budget,magic"), "'magic' is not one of"),
    (("prefill-deadline", "--set", "prompt=-5"), "must be >= 1"),
    (("prefill-deadline", "--plot", "out.pdf"), "ending in .png"),
    (("no-such-experiment",), "no such experiment"),
])
def test_input_errors_exit_2_with_one_line(args, needle):
    code, out, err = run_cli(*args)
    assert code == 2, (out, err)
    assert needle in err and err.count("\n") == 1 and out == ""


def test_registry_finds_the_experiment_modules():
    assert "prefill-deadline" in experiments.names()
    with pytest.raises(ValueError):
        experiments.experiment("prefill-deadline", title="again", knobs=())(lambda s, c: None)


def test_parse_settings_keeps_defaults_and_parses_lists():
    knobs = (Knob("a", 1.0, "a"), Knob("xs", (1, 2), "xs", "ints", minimum=1),
             Knob("w", ("p",), "w", "words", choices=("p", "q")))
    assert parse_settings("e", knobs, []) == {"a": 1.0, "xs": (1, 2), "w": ("p",)}
    assert parse_settings("e", knobs, ["xs=4, 8", "w=q,p", "a=2e-3"]) == {"a": 0.002, "xs": (4, 8),
                                                                         "w": ("q", "p")}
    with pytest.raises(InputError, match="integers separated by commas"):
        parse_settings("e", knobs, ["xs=4,x"])
    with pytest.raises(InputError, match="a number"):
        parse_settings("e", knobs, ["a=nan"])

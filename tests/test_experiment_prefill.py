"""The prefill deadline experiment: its table, its plot, its --set knobs, its errors."""

import pytest

from conftest import ROOT, json_error, run_grader
from experiment_helpers import COURSE, assert_saved_png, default_fixtures
from grader.course import experiments
from grader.engine.errors import InputError
from grader.course.experiments.common import Knob, parse_settings
from reference.shapes import CostModel


def run_cli(*args):
    return run_grader("experiment", *args)


default_outcome, default_run = default_fixtures("prefill-deadline", "deadline.png")


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
    assert_saved_png(*default_run)


def test_plot_draws_the_trade_off_and_where_each_rule_crosses_the_budget(default_outcome):
    outcome, _ = default_outcome
    rows = {r["rule"]: r for r in outcome.table.rows}
    gap, ttft, along = outcome.plot.panels
    fixed = [r for r in outcome.table.rows if r["chunk"] is not None]
    (line, *points) = gap.lines
    assert line.x == tuple(float(r["chunk"]) for r in fixed)
    assert line.y == tuple(r["gap_p99_ms"] for r in fixed)
    assert {p.label: (p.x, p.y) for p in points} == {
        f"rule {n}": ((rows[n]["mean_chunk"],), (rows[n]["gap_p99_ms"],)) for n in ("budget", "per_token_only")}
    assert gap.hlines == ((100.0, "budget 100 ms"),) and along.hlines == gap.hlines
    assert [l.label for l in ttft.lines][:2] == ["fixed chunk, p50", "fixed chunk, p99"]
    # Along the first long prompt: the budget rule's steps stay within it, the per-token
    # rule's cross it where the table says, and further in each of its chunks misses by more.
    steps = {l.label: list(zip(l.x, l.y)) for l in along.lines}
    budget = steps["rule budget"]
    assert all(ms <= 100.0 + 1e-9 for _, ms in budget) and rows["budget"]["first_miss"] is None
    per_token = steps["rule per_token_only"]
    first_over = next(at for at, ms in per_token if ms > 100.0)
    assert first_over == rows["per_token_only"]["first_miss"] == 0
    over = [ms for _, ms in per_token if ms > 100.0]
    assert over == sorted(over) and len(over) >= 2
    # By the cost model, with the 32 decoders at no less than their starting context of
    # 1,024 tokens: a fixed 2,048-token chunk can fit at the start of a prompt and cannot
    # from token 2,048 on; a 4,096-token chunk cannot even at the start.
    cost = CostModel()
    decode = cost.step_time((1024,) * 32)
    step = lambda c, d: decode + cost.step_time((), c, d) - cost.step_time(())
    assert step(2048, 0) <= 0.1 < step(2048, 2048) and 0.1 < step(4096, 0)
    assert rows["fixed 2048"]["first_miss"] == 2048 and rows["fixed 4096"]["first_miss"] == 0
    assert {n: rows[n]["first_miss"] for n in ("fixed 64", "fixed 512", "fixed 1024")} == dict.fromkeys(
        ("fixed 64", "fixed 512", "fixed 1024"))
    assert outcome.plot.warnings == ()


def test_the_table_fits_100_columns(default_outcome):
    outcome, _ = default_outcome
    assert max(len(line) for line in outcome.render().splitlines()) <= 100


def test_readme_shows_the_default_table(default_run):
    """The lesson's numbers are computed: the README's table is this experiment's output."""
    code, out, err = run_cli("prefill-deadline")
    assert code == 0, err
    readme = (ROOT / "assignments" / "lesson3" / "README.md").read_text()
    rows = [line for line in out.splitlines() if line.startswith(("  fixed", "  budget", "  per_token"))]
    assert len(rows) == 10
    for line in rows:
        assert line in readme, line
    assert "synthetic" in out and "gaps over" in out and "first miss" in out


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
    # Within the knob's bound, but past the model's context: every long prompt rejected.
    (("prefill-deadline", "--set", "prompt=32753"), "--set prompt=32753: 32753 tokens and the 16 its request "
     "emits are over gqa-8b-bf16's max_context of 32768: the contract would reject every one; at most 32752"),
    (("prefill-deadline", "--set", "decode_context=32768"), "at most 32767"),
    (("prefill-deadline", "--plot", "out.pdf"), "ending in .png"),
    # One setting given twice: the grader does not pick which was meant.
    (("prefill-deadline", "--set", "prompts=2", "--set", " prompts=3"),
     "--set  prompts=3: prompts is set twice (--set prompts=2 before); give it once"),
    (("no-such-experiment",), "no such experiment"),
])
def test_input_errors_exit_2_with_one_line(args, needle):
    code, out, err = run_cli(*args)
    assert code == 2, (out, err)
    assert needle in err and err.count("\n") == 1 and out == ""


def test_registry_finds_the_experiment_modules():
    assert "prefill-deadline" in experiments.names()
    with pytest.raises(ValueError):
        experiments.experiment("prefill-deadline", title="again", knobs=(), lesson="lesson3")(lambda s, c, d: None)


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


def test_a_knob_refuses_values_past_its_bounds_and_says_them():
    size = Knob("n", 4, "n", "int", minimum=1, maximum=100)
    sizes = Knob("xs", (1,), "xs", "ints", minimum=1, maximum=1 << 20)
    share = Knob("f", 0.5, "f", "float", minimum=0, maximum=1)
    tiny = Knob("t", 0.1, "t", "float", minimum=1e-6)
    cap = Knob("c", 3, "c", "int", maximum=9)
    assert parse_settings("e", (size, sizes, share), ["n=100", "xs=1,1048576", "f=1"]) == \
        {"n": 100, "xs": (1, 1 << 20), "f": 1.0}
    assert parse_settings("e", (size, share), ["n=1", "f=0"]) == {"n": 1, "f": 0.0}
    for knob, text, says in [(size, "n=101", "n: must be <= 100, got 101"),
                             (size, "n=0", "n: must be >= 1, got 0"),
                             (sizes, "xs=4,1048577", "xs: must be <= 1048576, got 1048577"),
                             (share, "f=1.0001", "f: must be <= 1, got 1.0001"),
                             (cap, "c=10", "c: must be <= 9, got 10")]:
        with pytest.raises(InputError) as e:
            parse_settings("e", (knob,), [text])
        assert str(e.value) == f"--set {text}: {says}"
    assert [k.bounds() for k in (size, sizes, share, tiny, cap, Knob("u", 1.0, "u"))] == [
        "; 1 to 100", "; each 1 to 1048576", "; 0 to 1", "; at least 1e-06", "; at most 9", ""]


def test_every_size_an_experiment_takes_is_bounded():
    # A typo (rates=100000) once started a run that went on silently for hours: every count
    # of runs, requests, prompts or tokens has an upper bound.
    sizes = {"goodput": {"rates", "requests", "seeds"},
             "prefill-deadline": {"prompt", "prompts", "decode_batch", "decode_context", "chunks"},
             "prefix-ownership": {"requests", "chunk", "cancel", "cancel_rates", "repeat"}}
    for name, knobs in sizes.items():
        table = {k.name: k for k in experiments.find(name).knobs}
        assert all(table[k].maximum is not None for k in knobs), name


def test_every_number_an_experiment_takes_is_bounded_both_ways():
    # Not only the sizes: per_token=1e300 (no maximum then) overflowed the chunk rule's
    # arithmetic into a traceback, and max_class_drop=1e300 was a share far past its whole.
    for name in experiments.names():
        for knob in experiments.find(name).knobs:
            if knob.kind != "words":
                assert knob.minimum is not None and knob.maximum is not None, (name, knob.name)
                assert knob.minimum <= min(_items(knob.default)) <= max(_items(knob.default)) <= knob.maximum
    # ... and an experiment that takes an open-ended number is refused when it registers.
    with pytest.raises(ValueError, match="'open': settings without both bounds: cost"):
        experiments.experiment("open", title="t", knobs=(Knob("cost", 1.0, "c", minimum=0),),
                               lesson="lesson3")(lambda s, c, d: None)
    assert "open" not in experiments.REGISTRY


def test_every_list_of_runs_is_bounded_in_length():
    # Each item of chunks is a worker run of its own: with only each item bounded,
    # chunks=1,2,...,5000 started a run of about half an hour, with no refusal.
    for name in experiments.names():
        for knob in experiments.find(name).knobs:
            if knob.kind == "ints":
                assert knob.max_items is not None and len(knob.default) <= knob.max_items, (name, knob.name)
    chunks = {k.name: k for k in experiments.find("prefill-deadline").knobs}["chunks"]
    text = ",".join(map(str, range(1, chunks.max_items + 2)))
    with pytest.raises(InputError) as e:
        parse_settings("prefill-deadline", experiments.find("prefill-deadline").knobs, [f"chunks={text}"])
    assert str(e.value) == f"--set chunks={text}: chunks: at most {chunks.max_items} items, got {chunks.max_items + 1}"
    assert chunks.bounds() == "; at most 32, each 1 to 1048576"       # as --help lists it
    with pytest.raises(ValueError, match="'open': settings without both bounds: sizes"):
        experiments.experiment("open", title="t", knobs=(Knob("sizes", (1,), "s", "ints", minimum=1, maximum=9),),
                               lesson="lesson3")(lambda s, c, d: None)


def _items(value):
    return value if isinstance(value, tuple) else (value,)


@pytest.mark.parametrize("name,text,says", [
    ("prefill-deadline", "per_token=1e300", "per_token: must be <= 1, got 1e+300"),
    ("prefill-deadline", "step_fixed=1e300", "step_fixed: must be <= 10, got 1e+300"),
    ("prefill-deadline", "interval=1e20", "interval: must be <= 3600, got 1e+20"),
    ("prefill-deadline", "min_chunk=1180591620717411303424", "min_chunk: must be <= 1048576, got "
                                                             "1180591620717411303424"),
    ("prefix-ownership", "seed=1180591620717411303424", "seed: must be <= 2147483647, got "
                                                        "1180591620717411303424"),
    ("goodput", "max_class_drop=2", "max_class_drop: must be <= 1, got 2.0"),
    ("goodput", "min_gain=-1e300", "min_gain: must be >= 0, got -1e+300"),
    ("goodput", "rate_to=1e300", "rate_to: must be <= 100000, got 1e+300"),
    # An item twice: goodput ran "gain" once while its settings line said gain,gain; the
    # other lists ran a row twice.
    ("goodput", "candidates=gain,gain", "candidates: gain is listed twice; give each once"),
    ("prefill-deadline", "chunks=64, 64", "chunks: 64 is listed twice; give each once"),
    ("prefix-ownership", "cancel_rates=40,20,40", "cancel_rates: 40 is listed twice; give each once"),
    # Digits of another script: int() reads "１２" as 12, and the line then showed another value.
    ("prefix-ownership", "seed=１２", "seed: expected an integer, got '１２'"),
    ("prefill-deadline", "budget=０.1", "budget: expected a number, got '０.1'"),
])
def test_a_setting_past_what_it_can_mean_is_refused_naming_it(name, text, says):
    with pytest.raises(InputError) as e:
        parse_settings(name, experiments.find(name).knobs, [text])
    assert str(e.value) == f"--set {text}: {says}"


def test_minus_zero_is_zero():
    value = parse_settings("e", (Knob("f", 0.5, "f", minimum=0, maximum=1),), ["f=-0"])["f"]
    assert value == 0.0 and str(value) == "0.0"


def test_a_cost_past_its_bound_is_one_line_not_a_traceback():
    code, out, err = run_cli("prefill-deadline", "--set", "per_token=1e300", "--json")
    assert code == 2
    json_error(out, err)
    assert err == "grader: --set per_token=1e300: per_token: must be <= 1, got 1e+300\n"

"""How the plots are drawn, read off the matplotlib objects (not pixels): series told apart
without colour, a learner's series apart from the reference's twin, thresholds named,
legends clear of the data and notes, degenerate cases in words, and PNGs that are the
same bytes for the same plot."""
from types import SimpleNamespace

import pytest

from conftest import ROOT
from grader.course import experiments
from grader.course.plots import (HATCHES, REFERENCE_PREFIX, Bars, Line, Panel, Plot, save_plot, styles)
from grader.engine.report import COST_MODEL_NOTE
from grader.engine.layout import find_course

COURSE = find_course(str(ROOT))


@pytest.fixture
def figures(monkeypatch):
    """The figures drawn, kept open for the test instead of being closed."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    kept, close = [], plt.close
    monkeypatch.setattr(plt, "close", kept.append)
    yield kept
    for fig in kept:
        close(fig)


def learner_and_reference() -> Plot:
    xs = (1.0, 2.0, 3.0)
    return Plot("t", "x (units)", (
        Panel("y (ms)", (Line("baseline", xs, (1.0, 2.0, 3.0)), Line("gain", xs, (1.0, 3.0, 4.0)),
                         Line(f"{REFERENCE_PREFIX}baseline", xs, (1.0, 2.0, 3.0)),
                         Line(f"{REFERENCE_PREFIX}gain", xs, (1.0, 3.0, 4.0))),
              hlines=((2.5, "budget 2.5 ms"),), notes=("a note in the corner",)),))


def test_the_reference_twin_shares_colour_and_marker_and_is_drawn_hollow_and_dashed(tmp_path, figures):
    st = styles(["gain", f"{REFERENCE_PREFIX}gain", "baseline"])
    assert st["gain"].colour == st[f"{REFERENCE_PREFIX}gain"].colour != st["baseline"].colour
    assert st["gain"].marker == st[f"{REFERENCE_PREFIX}gain"].marker != st["baseline"].marker
    save_plot(learner_and_reference(), tmp_path / "p.png")
    (fig,) = figures
    lines = {line.get_label(): line for line in fig.axes[0].get_lines()}
    mine, ref = lines["gain"], lines[f"{REFERENCE_PREFIX}gain"]
    # Where a correct learner's series lies on the reference's, both still show: the
    # learner's filled markers on top, inside the reference's larger hollow ones.
    assert mine.get_linestyle() == "-" and ref.get_linestyle() == "--"
    assert ref.get_markerfacecolor() == "none" and ref.get_markersize() > mine.get_markersize()
    assert mine.get_zorder() > ref.get_zorder()
    # Told apart without colour: no two of a panel's series share marker and line style.
    drawn = [(line.get_marker(), line.get_linestyle()) for line in lines.values() if line.get_marker() != "None"]
    assert len(set(drawn)) == len(drawn) == 4


def test_a_threshold_is_named_and_the_legend_stands_clear_of_the_axes(tmp_path, figures):
    save_plot(learner_and_reference(), tmp_path / "p.png")
    (fig,) = figures
    ax = fig.axes[0]
    legend = ax.get_legend()
    assert "budget 2.5 ms" in [t.get_text() for t in legend.get_texts()]
    (budget,) = [line for line in ax.get_lines() if line.get_label() == "budget 2.5 ms"]
    assert budget.get_linestyle() == "--"
    # Right of the axes: it covers neither a line nor the notes in the panel's corner.
    renderer = fig.canvas.get_renderer()
    assert legend.get_window_extent(renderer).x0 >= ax.get_window_extent(renderer).x1


def test_grouped_bars_are_hatched_apart_and_a_limit_per_category_is_named(tmp_path, figures):
    bars = Bars(("batch", "interactive"), (("base", (100.0, 90.0)), ("candidate", (100.0, 33.0))),
                least=100.0, limits=(95.0, 85.0), limits_label="rollback below: baseline - 5 points")
    save_plot(Plot("t", "", (Panel("attainment (%)", bars=bars),)), tmp_path / "b.png")
    (fig,) = figures
    ax = fig.axes[0]
    assert [c.get_label() for c in ax.containers] == ["base", "candidate"]
    assert [c.patches[0].get_hatch() or "" for c in ax.containers] == [HATCHES[0], HATCHES[1]]
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "rollback below: baseline - 5 points" in texts
    # One segment per category, at its limit.
    segments = [c for c in ax.collections if c.get_label() == "rollback below: baseline - 5 points"]
    assert len(segments) == 1 and [s[0][1] for s in segments[0].get_segments()] == [95.0]


def test_packed_bars_name_their_series_in_their_label(tmp_path, figures):
    bars = Bars(("design", "release at cancel"), (("use-after-free", (0.0, 16.0)), ("leaked pages", (0.0, 0.0))),
                horizontal=True, log=True, pack=True, fmt=".0f")
    save_plot(Plot("t", "", (Panel("recorded", bars=bars, xlabel="count"),)), tmp_path / "b.png")
    (fig,) = figures
    texts = [t.get_text().strip() for t in fig.axes[0].texts]
    assert "16 use-after-free" in texts and "none" in texts


def test_bars_with_no_row_say_so_in_words_and_draw_without_a_warning(tmp_path, figures):
    # A stub's experiment away from the edition's recorded defaults: every row is missing.
    import warnings
    from grader.course.plots import NO_BARS
    bars = Bars((), (("use-after-free", ()),), horizontal=True, log=True, pack=True, fmt=".0f")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        save_plot(Plot("t", "", (Panel("recorded", bars=bars, xlabel="count"),),
                       warnings=("rows ...: not implemented",)), tmp_path / "e.png")
    (fig,) = figures
    assert [t.get_text() for t in fig.axes[0].texts] == [NO_BARS]


def test_a_png_is_the_same_bytes_and_names_no_version_or_date(tmp_path):
    from PIL import Image
    one, two = (save_plot(learner_and_reference(), tmp_path / f"{n}.png") for n in ("a", "b"))
    assert one.read_bytes() == two.read_bytes()
    with Image.open(one) as im:
        assert not {"Software", "Creation Time", "date"} & set(im.info)


@pytest.mark.parametrize("panels", [1, 5])
def test_the_title_warnings_and_captions_stand_apart_and_above_the_panels(tmp_path, figures, panels):
    """The goodput plot's five panels made a figure 15 inches tall, and its three-line title,
    placed as a share of that height, came down onto the first warning."""
    xs = (1.0, 2.0)
    plot = Plot("first line\nsecond line\nthird line", "x", tuple(
        Panel(f"y{i}", (Line("a", xs, (1.0, 2.0)),)) for i in range(panels)),
        warnings=("rows a, b: not implemented: " + "why " * 40,), captions=("a caption",))
    save_plot(plot, tmp_path / "p.png")
    (fig,) = figures
    renderer = fig.canvas.get_renderer()
    title = fig._suptitle.get_window_extent(renderer)
    texts = sorted((t.get_window_extent(renderer) for t in fig.texts
                    if t.get_text() not in ("", COST_MODEL_NOTE) and t is not fig._suptitle),
                   key=lambda box: -box.y1)
    assert len(texts) == 3                      # the warning wraps to two lines, then the caption
    boxes = [title, *texts]
    assert all(upper.y0 >= lower.y1 for upper, lower in zip(boxes, boxes[1:]))
    top_axes = max(fig.axes, key=lambda ax: ax.get_position().y1).get_window_extent(renderer)
    assert texts[-1].y0 >= top_axes.y1
    assert title.y1 <= fig.bbox.y1


def test_a_stub_is_named_on_the_plot_not_only_in_the_table():
    stub = ROOT / "assignments" / "lesson3" / "exercise.py"
    outcome = experiments.run("prefill-deadline", ["prompts=2", "chunks=256,512"], COURSE, submission=str(stub))
    assert any(": not implemented: " in w and "NotImplementedError" in w for w in outcome.plot.warnings)
    assert "a bigger chunk stalls the decoders longer" in outcome.plot.title


def test_goodput_attainment_keeps_its_whole_scale_and_one_seed_promises_no_band():
    outcome = experiments.run("goodput", ["rates=1", "seeds=1", "requests=30"], COURSE)
    plot = outcome.plot
    assert "one seed: no spread over seeds to shade" in plot.title and "±" not in plot.title
    attainment = [p for p in plot.panels if "SLO attainment" in p.ylabel]
    assert attainment and all(p.ylim[0] <= 0 and p.ylim[1] >= 100 for p in attainment)


def class_numbers(scores, max_score=10.0):
    from grader.instructor.batch import distribution
    crit = SimpleNamespace(id="kv-bytes", pass_rate=0.5, mean_score=1.0, max_score=2.0)
    return SimpleNamespace(lesson="lesson1", max_score=max_score, graded=len(scores), scores=tuple(scores),
                           full_marks=sum(s >= max_score for s in scores),
                           distribution=distribution(scores, max_score), criteria=(crit,) if scores else ())


def test_the_class_histogram_marks_the_mean_and_median(tmp_path, figures):
    from grader.instructor.class_report.plots import score_at, scores_png
    numbers = class_numbers([0.0, 5.0, 6.0, 10.0])
    scores_png(numbers, tmp_path / "s.png")
    (fig,) = figures
    ax = fig.axes[0]
    marked = {line.get_label(): (line.get_xdata()[0], line.get_linestyle()) for line in ax.get_lines()}
    d = numbers.distribution
    assert marked == {f"mean {d['mean']:g}": (score_at(d["mean"], 10.0, 11), "--"),
                      f"median {d['median']:g}": (score_at(d["median"], 10.0, 11), ":")}
    assert score_at(5.0, 10.0, 11) == 4.5 and score_at(10.0, 10.0, 11) == 10.0


@pytest.mark.parametrize("scores", [
    [5.5, 5.5, 5.5, 1.0, 9.0],            # the median through the middle of a counted bar, the mean beside it
    [5.5] * 4 + [5.4] * 3,                # both lines through one bar's count
    [2.5, 2.5, 7.5, 7.5],                 # the median between two bars, the mean on neither
    [10.0, 10.0, 10.0],                   # everyone at full marks: both lines on the last bar
], ids=["median-through-a-count", "both-through-a-count", "between-bars", "all-full-marks"])
def test_no_line_runs_through_a_bars_count(tmp_path, figures, scores):
    """The count above each bar stays above its bar and clear of the mean and median lines
    (read off the drawn text's extent, in score-axis units, not pixels)."""
    from grader.instructor.class_report.plots import scores_png
    numbers = class_numbers(scores)
    scores_png(numbers, tmp_path / "s.png")
    (fig,) = figures
    ax = fig.axes[0]
    renderer = fig.canvas.get_renderer()
    to_data = ax.transData.inverted()
    # Where the lines are, computed here: bar i, centred on i, holds scores from i to i + 1
    # tenths of full marks; full marks are bar 10.
    d = numbers.distribution
    at = [10.0 if v >= 10.0 else v / 1.0 - 0.5 for v in (d["mean"], d["median"])]
    assert sorted(line.get_xdata()[0] for line in ax.get_lines()) == pytest.approx(sorted(at))
    counts = {i: b["count"] for i, b in enumerate(d["bins"]) if b["count"]}
    labels = [t for t in ax.texts if t.get_text().isdigit()]
    assert sorted(int(t.get_text()) for t in labels) == sorted(counts.values())
    for label in labels:
        box = label.get_window_extent(renderer)
        (left, _), (right, _) = to_data.transform([(box.x0, box.y0), (box.x1, box.y0)])
        assert all(not left <= x <= right for x in at), (label.get_text(), left, right, at)
        bar = round((left + right) / 2)
        assert counts[bar] == int(label.get_text()) and bar - 0.4 <= left and right <= bar + 0.4


def test_a_class_with_nobody_graded_says_so_in_both_figures(tmp_path, figures):
    from grader.instructor.class_report.plots import NOBODY, criteria_png, scores_png
    numbers = class_numbers([])
    scores_png(numbers, tmp_path / "s.png")
    criteria_png(numbers, tmp_path / "c.png")
    assert len(figures) == 2
    for fig in figures:
        (ax,) = fig.axes
        assert [t.get_text() for t in ax.texts] == [NOBODY] and not ax.axison

"""What the experiments' test files share: the experiment run once per file with its
defaults, its plot saved, and the checks every experiment's output must pass."""

import pytest

from conftest import ROOT
from grader.course import experiments
from grader.course.experiments.common import save_plot
from grader.engine.layout import find_course

COURSE = find_course(str(ROOT))
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def default_fixtures(name: str, png_name: str):
    """Module fixtures ``default_outcome`` (the outcome and its saved PNG) and
    ``default_run`` (its JSON form, with the plot's path, and the PNG) of one experiment."""

    @pytest.fixture(scope="module")
    def default_outcome(tmp_path_factory):
        # Run in this process: the plot is data to assert, not only a file.
        outcome = experiments.run(name, [], COURSE)
        return outcome, save_plot(outcome.plot, tmp_path_factory.mktemp("plot") / png_name)

    @pytest.fixture(scope="module")
    def default_run(default_outcome):
        outcome, png = default_outcome
        return {**outcome.to_dict(), "plot": str(png)}, png

    return default_outcome, default_run


def assert_saved_png(data: dict, png) -> None:
    """The JSON names the plot written, and it is a PNG with something drawn in it."""
    assert data["plot"] == str(png)
    blob = png.read_bytes()
    assert blob[:8] == PNG_MAGIC and len(blob) > 10_000

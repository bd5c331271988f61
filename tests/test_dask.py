"""Grading on a Dask cluster: workers grade, the client alone writes the gradebook, and the
results are the local pool's."""
import json
import subprocess
import sys

import pytest

from classroom import make_class
from conftest import ROOT, SECRET
from grader.instructor.batch import run_batch
from grader.engine.layout import find_course
from grader.engine.errors import InputError
from grader.instructor.gradebook import open_gradebook

COURSE = find_course(str(ROOT))


@pytest.fixture(scope="module")
def scheduler():
    from distributed import LocalCluster
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                      host="127.0.0.1") as cluster:
        yield cluster.scheduler_address


def test_dask_grades_like_the_local_pool(scheduler, tmp_path):
    make_class(tmp_path / "class", "lesson1", 8, seed=9, slow=0)
    secret = tmp_path / "course.secret"
    secret.write_bytes(SECRET)
    url = f"sqlite:///{tmp_path / 'dask.db'}"
    p = subprocess.run([sys.executable, "-m", "grader.cli", "grade", "lesson1", str(tmp_path / "class"),
                        "--secret-file", str(secret), "--gradebook", url, "--scheduler", scheduler,
                        "--json", "--quiet"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout)
    assert summary["graded"] == 8 and not summary["failed"] and summary["workers"].startswith("Dask")
    with open_gradebook(str(tmp_path / "local.db")) as book:
        run_batch("lesson1", tmp_path / "class", COURSE, SECRET, book, jobs=1, progress=False)
        local = {r.student: r.report for r in book.results()}
    with open_gradebook(url) as book:
        remote = {r.student: r.report for r in book.results()}
        again = run_batch("lesson1", tmp_path / "class", COURSE, SECRET, book, scheduler=scheduler,
                          progress=False)
        assert (again.graded, again.skipped) == (0, 8)       # resumable there too
    for report in (*local.values(), *remote.values()):
        report.pop("duration_s")
    assert remote == local


@pytest.mark.parametrize("client_side,says", [
    # A worker that builds other cases than the client (another course) refuses to grade;
    ("cases_digest", "other lesson1 cases than the client"),
    # so does one that reads another rubric (another copy of the course, or one edited since).
    ("rubric_digest", "another lesson1 rubric than the client graded with"),
])
def test_a_worker_failure_is_that_students_error(scheduler, tmp_path, monkeypatch, client_side, says):
    make_class(tmp_path / "class", "lesson1", 2, seed=1, slow=0)
    with open_gradebook(str(tmp_path / "gb.db")) as book:
        import grader.instructor.batch as batch
        monkeypatch.setattr(batch, client_side, lambda *_: "not-what-workers-build")
        s = run_batch("lesson1", tmp_path / "class", COURSE, SECRET, book, scheduler=scheduler,
                      progress=False)
    assert s.graded == 0 and len(s.failed) == 2
    assert all(says in why for _, why in s.failed)


@pytest.mark.parametrize("address,says", [
    ("tcp://127.0.0.1:9", "cannot reach the Dask scheduler"),
    ("http://127.0.0.1:8787", "not a Dask scheduler's address (unknown address scheme 'http'"),
    ("127.0.0.1", "not a Dask scheduler's address (missing port number"),
])
def test_a_scheduler_not_reached_refuses_the_class_before_anything_is_recorded(tmp_path, monkeypatch,
                                                                              address, says):
    """Refused whole, as a class that could not be confined is: not after the unreadable
    submissions' error rows were written, nor graded some other way."""
    import grader.instructor.batch as batch
    monkeypatch.setattr(batch, "DASK_CONNECT_TIMEOUT", "1s")
    make_class(tmp_path / "class", "lesson1", 1, seed=1, slow=0)
    (tmp_path / "class" / "submitted" / "zed.py").write_bytes(b"\x00")   # an error row, were it graded
    with open_gradebook(str(tmp_path / "gb.db")) as book:
        with pytest.raises(InputError) as refused:
            run_batch("lesson1", tmp_path / "class", COURSE, SECRET, book,
                      scheduler=address, progress=False)
        assert refused.value.where == address and says in refused.value.message
        assert book.results() == []


@pytest.fixture
def one_worker():
    """A cluster of its own, for a test that stops it or changes its worker."""
    from distributed import LocalCluster
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None,
                      host="127.0.0.1") as cluster:
        yield cluster


def test_a_scheduler_lost_mid_class_stops_it_and_keeps_what_was_recorded(tmp_path, one_worker):
    """The scheduler gone mid-class cancels every submission not yet back: recorded, each
    was a 0-point "the grader failed" row and the run ended as if the class were graded.
    It stops, as at Ctrl-C, keeping what was recorded, and the same command grades the rest."""
    from grader.instructor.batch import ClusterStopped
    make_class(tmp_path / "class", "lesson1", 4, seed=2, slow=0)
    with open_gradebook(str(tmp_path / "gb.db")) as book:
        record = book.record

        def then_the_scheduler_goes(student, report):
            record(student, report)
            one_worker.close()
        book.record = then_the_scheduler_goes
        with pytest.raises(ClusterStopped) as stopped:
            run_batch("lesson1", tmp_path / "class", COURSE, SECRET, book,
                      scheduler=one_worker.scheduler_address, progress=False)
        assert stopped.value.where == one_worker.scheduler_address
        assert stopped.value.message.startswith("lost the Dask scheduler mid-class (")
        assert "stopped after 1 of 4 results this run" in stopped.value.message
        assert stopped.value.message.endswith("the same command grades the rest")
        assert [r.status for r in book.results()] == ["graded"]        # no error rows


def _without_confinement():
    """On a worker: every grade refused as where neither bubblewrap nor Landlock can confine
    a submission (the sandbox's own refusal, raised where grading starts)."""
    import grader.engine.pipeline as pipeline
    from grader.engine.sandbox.session import Unconfined

    def refused(*_args, **_kwargs):
        raise Unconfined("Landlock (this worker's kernel has none)", "process (no bwrap: test)")
    pipeline.grade_submission = refused


def test_a_worker_that_cannot_confine_a_submission_refuses_the_class(tmp_path, one_worker):
    """Refused as a local grade refuses before it starts: not a class of students recorded as
    ones the grader failed on, 0 points each, ending with exit 0."""
    from distributed import Client
    from grader.instructor.batch import ClusterStopped
    make_class(tmp_path / "class", "lesson1", 2, seed=3, slow=0)
    with Client(one_worker.scheduler_address) as client:
        client.run(_without_confinement)
    with open_gradebook(str(tmp_path / "gb.db")) as book:
        with pytest.raises(ClusterStopped) as refused:
            run_batch("lesson1", tmp_path / "class", COURSE, SECRET, book,
                      scheduler=one_worker.scheduler_address, progress=False)
        assert refused.value.message.startswith("a Dask worker refusing to grade: a submission here "
                                                "could read the course")
        assert "(every worker confining a submission)" in refused.value.message
        assert book.results() == []

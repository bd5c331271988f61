"""Shared test helpers: grade a submission file the way the CLI does."""
from __future__ import annotations

import atexit
import functools
import hashlib
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import Phase, settings

from grader.engine.layout import find_course
from grader.engine.pipeline import build_cases, grade_path
from mutants import write_mutant  # noqa: F401  (the tests' name for it: tests/mutants.py)

# The memo of public cases and oracle runs (grader.engine.memo) starts empty for every session and
# never touches the user's ~/.cache; the command-line runs inherit the same folder.
os.environ["GRADER_CACHE"] = tempfile.mkdtemp(prefix="grader-test-cache-")
atexit.register(shutil.rmtree, os.environ["GRADER_CACHE"], True)

# No wall-clock deadline per example: the suite runs on a loaded machine. The mutation runs
# (bench/mutation.py) draw the same examples every time, so a mutant is killed or not, never
# by luck, and do not shrink a failure (only whether there is one counts); the ordinary runs
# draw new ones each time.
settings.register_profile("suite", deadline=None)
settings.register_profile("mutation", deadline=None, derandomize=True, database=None,
                          phases=(Phase.explicit, Phase.reuse, Phase.generate))
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "suite"))

ROOT = Path(__file__).resolve().parent.parent
SUBMISSIONS = ROOT / "tests" / "submissions"
SECRET = b"test-secret-for-hidden-cases"
# Hidden cases are drawn from the instructor secret, so whatever a test expects of them must
# hold for every secret, not for the one a test happens to use. Such tests take the `secret`
# fixture: a fixed secret and one drawn at random per run, whose value is in the test's id
# (test_x[random-0123abcd...]) and in the run's header; GRADER_TEST_SECRET=<hex> draws it again.
# Drawn once, in the process that starts the run: its workers inherit it, so every worker
# collects the same test ids. GRADER_TEST_EVERY_SECRET=1 (the mutation runs) adds a second
# fixed one, which every run held until a third of the suite's time went to it.
os.environ["GRADER_TEST_SECRET"] = os.environ.get("GRADER_TEST_SECRET") or secrets.token_hex(8)
RANDOM_SECRET = bytes.fromhex(os.environ["GRADER_TEST_SECRET"])
OTHER_SECRET = b"another secret"
SECRETS = {"fixed": SECRET,
           **({"other": OTHER_SECRET} if os.environ.get("GRADER_TEST_EVERY_SECRET") == "1" else {}),
           f"random-{RANDOM_SECRET.hex()}": RANDOM_SECRET}


def other_than(secret: bytes) -> bytes:
    """A secret that is not ``secret``: what another course would use."""
    return secret + b"'"


@pytest.fixture
def course(tmp_path):
    """A copy of the course's rubrics and assignments, free to break."""
    root = tmp_path / "course"
    shutil.copytree(ROOT / "rubrics", root / "rubrics")
    shutil.copytree(ROOT / "assignments", root / "assignments",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return root


@pytest.fixture(scope="module", params=list(SECRETS.values()), ids=list(SECRETS))
def secret(request) -> bytes:
    return request.param


# Forty secrets beyond the fixture's, for properties of the hidden cases themselves (cheap
# to draw, no grade): a property drawn rather than placed failed under a few secrets in a
# hundred, which three secrets a run seldom meet.
MORE_SECRETS = [hashlib.sha256(b"more secrets %d" % i).digest()[:8] for i in range(40)]
_SECRET_SETS = {**{name: [s] for name, s in {**SECRETS, "other": OTHER_SECRET}.items()},
                **{f"more-{i // 8}": MORE_SECRETS[i:i + 8] for i in range(0, len(MORE_SECRETS), 8)}}


@pytest.fixture(params=list(_SECRET_SETS.values()), ids=list(_SECRET_SETS))
def many_secrets(request) -> list[bytes]:
    """The `secret` fixture's secrets one at a time, then MORE_SECRETS eight at a time."""
    return request.param


def _never_skipped(report) -> None:
    """A skipped test is never done: a skip (pytest.skip, a skip mark, an importorskip, an
    empty parameter set, a whole file skipped at import) or an expected failure fails the
    run, saying why, rather than leaving a green run that tested less than it says."""
    if report.skipped:
        why = f"expected to fail: {report.wasxfail}" if hasattr(report, "wasxfail") else \
            f"skipped: {report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr}"
        report.outcome, report.longrepr = "failed", f"{why} (the suite never skips: docs/testing.md)"
        if hasattr(report, "wasxfail"):
            del report.wasxfail


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    _never_skipped((yield).get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    _never_skipped((yield).get_result())


def pytest_report_header(config):
    return f"hidden cases under the secrets {', '.join(SECRETS)} (GRADER_TEST_SECRET={RANDOM_SECRET.hex()})"


def grade(lesson: str, path, mode: str = "check", secret: bytes | None = None):
    graded = mode == "grade"
    return grade_path(lesson, Path(path), find_course(str(ROOT)), mode=mode,
                      secret=secret if graded else None,
                      cases=list(_graded_cases(lesson, secret)) if graded else None)


@functools.lru_cache(maxsize=None)
def _graded_cases(lesson: str, secret: bytes) -> tuple:
    """A grade's cases, built once per lesson and secret in a test process, as a class's
    grade builds them once per worker process (grader.instructor.batch): each of lesson 5's
    hundreds of graded submissions drew its hidden runs again, about a second a grade. What
    builds them is tested where it is the point (build_cases, hidden_cases)."""
    return tuple(build_cases(lesson, find_course(str(ROOT)), secret))


def scores(report) -> dict[str, float]:
    return {c.id: c.score for c in report.criteria}


def full(report) -> dict[str, float]:
    return {c.id: c.max_score for c in report.criteria}


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


def answer_to(frame: bytes):
    """A frame from a child, read as the grader reads it (no child: the reading alone)."""
    from types import SimpleNamespace
    from grader.engine.sandbox.session import Sandbox
    return Sandbox._result(SimpleNamespace(_filename="exercise.py"), "f", frame)


def refused(capsys, *args, never=()) -> str:
    """Run the CLI in this process; it must exit 2 with exactly one line on stderr (no
    traceback, none of the texts ``never``) and nothing on stdout. That line."""
    from grader.cli import main
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    assert code == 2 and out == "", (code, out, err)
    assert err.startswith("grader: ") and err.count("\n") == 1, err
    assert "Traceback" not in err and not any(text in err for text in never), err
    return err


def run_grader(*args, cwd=ROOT, timeout=300, full_disk_at=None):
    """The command line as a person runs it: (exit code, stdout, stderr). ``full_disk_at``:
    as if the disk filled up once it had written that many bytes into any one file (a write
    past it fails, as on a full disk, rather than the process being killed)."""
    def full_disk():
        import resource
        import signal
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (full_disk_at, full_disk_at))
    p = subprocess.run([sys.executable, "-m", "grader.cli", *args], cwd=cwd,
                       capture_output=True, text=True, timeout=timeout,
                       preexec_fn=full_disk if full_disk_at is not None else None,
                       env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"} if full_disk_at else None)
    return p.returncode, p.stdout, p.stderr


def json_error(out: str, err: str) -> dict:
    """What ``--json`` prints on stdout beside an input error's one line on stderr: the same
    line as one object, ``{"error": ..., "exit_code": 2}``."""
    assert out.count("\n") == 1, out
    error = json.loads(out)
    assert error["error"] == err.removeprefix("grader: ").rstrip("\n") and error["exit_code"] == 2, (out, err)
    return error


def nothing_but_the_error(out: str, err: str, args) -> None:
    """A refused command prints nothing on stdout, or with ``--json`` the error's object."""
    if "--json" in args:
        json_error(out, err)
    else:
        assert out == "", (out, err)


def experiment_run(name: str, folder: Path, plot: str):
    """One experiment with its defaults, through the command line, with --json and --plot."""
    png = folder / plot
    code, out, err = run_grader("experiment", name, "--json", "--plot", str(png))
    assert code == 0, err
    return json.loads(out), png


def without_landlock(child_source: str) -> str:
    """The sandbox child's source made to find no Landlock, as on a kernel without it
    (before 5.12, which has no mount_setattr either): its install_landlock returns '' at
    once and its read_only_tree False (whatever their parameters are), so a file that
    learner code writes on the host shows that it ran."""
    for name, value in (("install_landlock", "''"), ("read_only_tree", "False")):
        head = re.search(r"^def %s\((?P<params>[^)]*)\):\n" % name, child_source, re.M)
        assert head, f"the sandbox child has no {name} to disable"
        child_source = child_source.replace(
            head.group(0), f"{head.group(0)}    return {value}\n\n\n"
                           f"def _unused_{name}({head.group('params')}):\n", 1)
    return child_source

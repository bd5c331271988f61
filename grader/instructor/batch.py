"""Grading a whole class: find the submissions, grade what is missing, record each result.

A class folder is either nbgrader's layout (``submitted/<student>/<lesson>/<file>``) or a
flat folder of ``<student>.py`` / ``<student>.ipynb``. A missing or unreadable file is one
student's error (recorded, reported), never a stop.

Each submission is graded in its own sandbox by a worker (local processes, or a Dask
cluster); the parent alone writes the gradebook, one transaction per submission, as each
result arrives. So a run killed at any moment keeps everything already recorded, and the
next run skips every (student, submission digest, rubric version, cases) already graded.
Results do not depend on the number of workers: a worker builds the same cases from the
same secret and grades one submission at a time in a fresh sandbox.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import statistics
import sys
import threading
import time
import unicodedata
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Iterator

from grader.engine.layout import Course
from grader.engine.sandbox import affinity
from grader.engine.errors import InputError
from grader.engine.fingerprint import grading_version
from grader.instructor.outputs import instructor_folder, instructor_output
from grader.instructor.gradebook import (GRADER_FAILED, CriterionInfo, Gradebook, GradebookWriteError,
                                         LessonInfo, cases_digest)
from grader.engine.progress import Progress
from grader.engine.code_file import choose, code_suffix, lesson_functions
from grader.engine.submission import (Submission, is_own_file_name, is_submission_folder,
                                       load_submission)
from grader.engine.text import as_text, first_few, plural, terminal

# What an archiver leaves beside the students (macOS's zip: a copy of each file's metadata),
# never a student: recorded, it would be a student with 0 points in every export, for good.
NOT_STUDENTS = ("__MACOSX",)
DASK_CONNECT_TIMEOUT = "10s"


# ---------------------------------------------------------------------------- discovery

@dataclass(frozen=True)
class Entry:
    """One student's submission for the lesson, or why there is none to grade."""
    student: str
    path: str
    problem: str = ""
    note: str = ""             # which of several files was graded, for the report


def _pick(folder: Path, lesson: str, functions: tuple[str, ...]) -> tuple[str, str, str]:
    """The file to grade in an nbgrader submission folder, by the rule a Gradescope upload
    is read by too (grader.engine.code_file): (path, problem, note for the report)."""
    files = [Path(p.name) for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")]
    choice = choose(folder, files, lesson, functions)
    if choice.file is not None:
        return str(folder / choice.file), "", as_text(choice.note)
    if any(code_suffix(f) for f in files):
        return str(folder), as_text(choice.problem), ""
    # What is there instead (answers.txt, a .zip) tells the student what to hand in again; a
    # folder is shown as one (exercise.py/, an unzipped upload), or the line reads as a
    # contradiction: no .py file, and it holds exercise.py.
    held = sorted(p.name + ("/" if p.is_dir() else "") for p in folder.iterdir()
                  if not p.name.startswith("."))
    there = f"it holds {first_few(held)}" if held else "it is empty"
    return str(folder), as_text(f"{choice.problem} in the submission folder ({there})"), ""


NOT_UTF8 = ("its name is not UTF-8 text ({name}): rename it (the archive it came from used "
            "another encoding), then grade again")


def class_root(folder: Path) -> Path:
    """Where a class folder's students are: its submitted/ (nbgrader's layout), or itself."""
    return folder / "submitted" if (folder / "submitted").is_dir() else folder


def within(path: str, root: Path) -> str:
    """A submission as results name it: its path inside the class folder (``alice.py``,
    ``alice/lesson1/exercise.py``), so a result does not depend on where the folder lies
    or how the command line named it."""
    return as_text(Path(os.path.relpath(path, root)).as_posix())


def discover(folder: Path, lesson: str, course: Course | None = None) -> list[Entry]:
    """Every student found in ``folder``, sorted by name. For a lesson whose submission is a
    folder, ``<student>/<lesson>/`` (nbgrader) or ``<student>/`` itself is the submission.
    ``course`` (default: the one found from here) holds the lesson's stub, whose functions
    tell which of a student's several files to grade."""
    from grader.engine.layout import find_course
    from grader.engine.pipeline import folder_files
    files = folder_files(lesson)
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(str(folder), "no such submissions folder")
    root = class_root(folder)
    functions: tuple[str, ...] = ()
    if files is None:
        functions = lesson_functions((course or find_course()).assignment(lesson) / "exercise.py")
        own = sorted(p.name for p in root.iterdir() if code_suffix(p)
                     and is_own_file_name(p.stem) and not p.name.startswith("."))
        if own:
            # A class of <student>.py files has no student named "exercise": this is one
            # student's folder, and graded as a class it would record "exercise" as a student.
            raise InputError(str(folder), f"holds {own[0]}, a submission's own file rather than a "
                                          f"<student>.py: this is one student's folder; grade the class "
                                          f"folder holding every student, or the file itself "
                                          f"(recorded as the student its folders name)")
    found: dict[str, list[Entry]] = {}
    inside = root.resolve()
    for item in sorted(root.iterdir()):
        if item.name.startswith(".") or item.name in NOT_STUDENTS:
            continue
        if _graders_own(item):
            continue
        # A student is their name in NFC: a macOS zip spells "José" decomposed (NFD), and
        # the two spellings must be one student (and two files of theirs, two submissions).
        student = unicodedata.normalize("NFC", item.name if item.is_dir() or not code_suffix(item)
                                        else item.stem)
        if as_text(student) != student:
            # Not graded under a made-up name: the student's id would match no roster.
            student = as_text(student)
            found.setdefault(student, []).append(Entry(student, str(item), NOT_UTF8.format(name=student)))
            continue
        if item.is_dir():
            where = item / lesson
            if files is not None and not where.is_dir() and is_submission_folder(item, files):
                where = item
            note = ""
            # What is in a student's folder is theirs (an unzipped upload, a clone of their
            # repository): a link in it is followed only within their own folder. One into
            # another student's (../../alice/lesson1/exercise.py) graded that student's file
            # as theirs, and told them its failures and error messages in their feedback.
            own = _own(item)
            stray = _not_read(where, inside, own)
            if stray:
                # Not even listed: choosing among its files would read them, and a tie
                # would name them in the student's feedback.
                path, problem = str(where), stray
            elif where.is_dir():
                path, problem, note = ((str(where), "", "") if files is not None
                                       else _pick(where, lesson, functions))
                if not problem:
                    problem = _not_read(Path(path), inside, own)
            else:
                path, problem = str(where), f"no submission for {lesson} (no folder {where.name}/)"
            found.setdefault(student, []).append(Entry(student, path, problem, note))
        elif code_suffix(item):
            found.setdefault(student, []).append(Entry(student, str(item)))
        else:
            found.setdefault(student, []).append(
                Entry(student, str(item), "not a submission (a .py file or a .ipynb notebook)"))
    for options in found.values():
        for i, e in enumerate(options):
            stray = "" if e.problem else _leads_outside(Path(e.path), inside)
            if stray:
                options[i] = Entry(e.student, e.path, stray)
    entries = []
    for student, options in sorted(found.items()):
        if len(options) == 1:
            entries.append(options[0])
        else:
            # Named within the class folder: the student reads this in their feedback, and the
            # instructor's own paths are not theirs to see.
            paths = " and ".join(within(e.path, root) for e in options)
            entries.append(Entry(student, options[0].path, f"two submissions: {paths}; keep one"))
    return entries


def _graders_own(item: Path) -> bool:
    """What a command of the grader's wrote into the class folder (`grader feedback --out
    submitted/`, a CSV export, a report's page, an old gradebook), or a folder of nothing
    else (`grader report --out submitted/report/`, `feedback --out submitted/feedback/`):
    recorded, each would be a student with 0 points in every export, and get a feedback
    page of its own. A code file is always a submission, whatever its first bytes."""
    if item.is_symlink() or code_suffix(item):
        return False
    if item.is_dir():
        return instructor_folder(item)
    return item.is_file() and bool(instructor_output(item))


def _leads_outside(path: Path, inside: Path, own: bool = False) -> str:
    """Why ``path`` is not read, or "": a submission is read from inside the class folder
    only, so a symbolic link that leads elsewhere (the instructor's secret, a folder of
    solutions) is not followed, and one that leads round in a loop is that student's error,
    not the whole class's. ``own``: ``inside`` is the student's own folder (``_own``), which
    ``path`` may be itself."""
    try:
        real = path.resolve()
    except (OSError, RuntimeError):         # a loop: RuntimeError before Python 3.13
        return "a symbolic link that leads round in a loop; hand in the file itself"
    if own and real != inside and inside not in real.parents:
        return ("a symbolic link that leads outside the student's own folder (into another "
                "student's?); hand in the file itself")
    if not own and inside not in real.parents:
        return "a symbolic link that leads outside the class folder; hand in the file itself"
    return ""


def _not_read(path: Path, inside: Path, own: Path) -> str:
    """Why a path in a student's folder ``own`` is not read, or "": it must lead neither out of
    the class folder ``inside`` nor out of their own folder."""
    return _leads_outside(path, inside) or _leads_outside(path, own, own=True)


def _own(item: Path) -> Path:
    """A student's folder where it really is: the class folder's entry itself, or what the
    entry leads to when the class folder's maker linked it (checked to be inside the class
    folder first)."""
    try:
        return item.resolve()
    except (OSError, RuntimeError):
        return item


NOT_SUBMISSIONS = ("not a submission", "no submission for")


def refuse_a_folder_of_no_submissions(entries: list[Entry], folder: Path, lesson: str) -> None:
    """A folder where nothing is even an attempt at a submission is the wrong folder (empty,
    the course's assignments/, another lesson's class): refused before anything is
    recorded, rather than graded as a class of nobody, or of README.md and lesson2/ as
    students with 0 points each, in the gradebook and every export."""
    if any(not e.problem.startswith(NOT_SUBMISSIONS) for e in entries):
        return
    seen = (f"{len(entries)} entr{'y' if len(entries) == 1 else 'ies'}, none a submission, e.g. "
            f"{Path(entries[0].path).name}" if entries else "it is empty")
    raise InputError(str(folder), f"no submission for {lesson} here ({seen}): a class folder holds "
                                  f"<student>.py or <student>.ipynb files, or nbgrader's "
                                  f"submitted/<student>/{lesson}/ folders")


# ---------------------------------------------------------------------------- one job

_PREPARED: dict[tuple, tuple] = {}
_PREPARED_LOCK = threading.Lock()      # a Dask worker grades in several threads


def rubric_digest(course: Course, lesson: str) -> str:
    """The rubric file's bytes as a digest: what the client graded with, which every worker
    must grade with too (a check's parameters changed alone show nowhere else)."""
    return hashlib.sha256(course.rubric_path(lesson).read_bytes()).hexdigest()


def _prepared(course_root: str, lesson: str, secret: bytes, expected_cases: str,
              expected_rubric: str):
    """The rubric and cases of this lesson and secret, built once per worker process."""
    from grader.engine.checks import REGISTRY
    from grader.lessons import lesson_module
    from grader.engine.pipeline import build_cases
    from grader.engine.rubric import load_rubric

    course = Course(Path(course_root))
    # A rubric edited while the class is graded (or another on a Dask worker's machine) would
    # grade the rest of the class by other points under the same version, and the gradebook
    # would total them as one rubric: the worker refuses to grade by any rubric but the client's.
    digest = rubric_digest(course, lesson)
    if digest != expected_rubric:
        raise RuntimeError(f"this worker reads another {lesson} rubric than the client graded with "
                           f"({course.rubric_path(lesson)}: digest {digest[:12]}, expected "
                           f"{expected_rubric[:12]}): was it edited during the grade, or is the "
                           f"course at {course_root} not the same on every worker?")
    key = (course_root, lesson, hashlib.sha256(secret).hexdigest(), expected_cases, digest)
    with _PREPARED_LOCK:
        if key not in _PREPARED:
            lesson_module(lesson)
            rubric = load_rubric(course.rubric_path(lesson), REGISTRY)
            cases = build_cases(lesson, course, secret)
            got = cases_digest([c.summary() for c in cases])
            if got != expected_cases:
                raise RuntimeError(f"this worker builds other {lesson} cases than the client "
                                   f"(cases digest {got[:12]}, expected {expected_cases[:12]}): "
                                   f"is the course at {course_root} the same on every worker?")
            _PREPARED[key] = (course, rubric, cases)
        return _PREPARED[key]


def grade_one(course_root: str, lesson: str, secret: bytes, expected_cases: str,
              expected_rubric: str, expected_grader: str, unconfined_ok: bool,
              submission: Submission) -> dict:
    """Grade one submission (in a worker): its report as a dict."""
    from grader.engine.pipeline import grade_submission
    if grading_version() != expected_grader:
        # A Dask worker with another copy of the grader would grade some of the class by
        # other rules than the rest, and say nothing.
        raise RuntimeError(f"this worker's grading code ({grading_version()}) is not the "
                           f"client's ({expected_grader}): install the same grader on every worker")
    course, rubric, cases = _prepared(course_root, lesson, secret, expected_cases,
                                      expected_rubric)
    report = grade_submission(lesson, submission, course, mode="grade", secret=secret,
                              rubric=rubric, cases=cases, unconfined_ok=unconfined_ok)
    return report.to_dict()


# ---------------------------------------------------------------------------- executors

@dataclass(frozen=True)
class Job:
    student: str
    submission: Submission


Outcome = Iterator[tuple[Job, "dict | BaseException"]]


def _start_worker(grader_pid: int, started, workers: int, pids=None) -> None:
    """Pool worker initializer: die with the grader, say who it is (``pids``, so the grader
    can stop it mid-submission), and take a CPU of its own for the sandboxes' round trips
    (grader.engine.sandbox.affinity)."""
    _die_with_grader(grader_pid)
    # Ctrl-C at a terminal reaches every process of the command: the grader alone stops the
    # class (it kills its workers, _stop_workers); a worker taking it as its own printed
    # "Process ForkProcess-1:" and a traceback into the instructor's terminal.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with started.get_lock():
        index, started.value = started.value, started.value + 1
    if pids is not None and index < len(pids):
        pids[index] = os.getpid()
    affinity.claim_cpu(index, workers)


def _stop_workers(pids) -> None:
    """Kill the pool's workers where they are; their sandboxes die with them."""
    for pid in pids:
        if pid:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _die_with_grader(grader_pid: int) -> None:
    """A pool worker must not outlive a grader killed with -9.

    Linux: PR_SET_PDEATHSIG. Everywhere (and for a grader that died before the prctl):
    a thread that watches the grader's pid."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes
            ctypes.CDLL(None).prctl(1, 9, 0, 0, 0)      # SIGKILL when the parent dies
        except Exception:
            pass

    def watch():
        while True:
            time.sleep(0.5)
            try:
                os.kill(grader_pid, 0)
            except ProcessLookupError:
                os._exit(1)
            except PermissionError:
                pass
    threading.Thread(target=watch, name="grader-watch", daemon=True).start()


def _inline(jobs: list[Job], task: Callable[[Submission], dict]) -> Outcome:
    for job in jobs:
        try:
            yield job, task(job.submission)
        except Exception as e:        # a grader failure on one submission is that student's error
            yield job, e


def _local_pool(jobs: list[Job], n: int, args: tuple) -> Outcome:
    import multiprocessing
    # fork: workers start with everything imported and are the grader's own children. The
    # parent holds no threads and no busy database handle here (the children never touch
    # the gradebook and leave with os._exit), so forking is safe; elsewhere, spawn.
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    context = multiprocessing.get_context(method)
    pids = context.Array("i", n)
    pool = ProcessPoolExecutor(max_workers=n, mp_context=context, initializer=_start_worker,
                               initargs=(os.getpid(), context.Value("i", 0), n, pids))
    futures: dict = {}
    try:
        futures = {pool.submit(grade_one, *args, job.submission): job for job in jobs}
        for future in as_completed(futures):
            try:
                yield futures[future], future.result()
            except Exception as e:
                yield futures[future], e
    except BaseException:
        # Stopped early (Ctrl-C, a full gradebook): the submission in each worker's hands, and
        # the one queued behind it, would be graded to the end (a looping one takes its whole
        # time budget) while the instructor waits, for results no one will record. A worker
        # killed breaks the pool, which then ends the others (one not yet started too) and
        # reaps them all before the shutdown below returns.
        for future in futures:
            future.cancel()
        _stop_workers(pids)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _cluster(scheduler: str | None):
    """A client of the Dask scheduler at ``scheduler`` (a context that closes it), or, with
    none, a context of None. One that cannot be reached, or an address that is not a
    scheduler's, is an input error naming it: never a class graded some other way."""
    if not scheduler:
        return contextlib.nullcontext()
    try:
        from distributed import Client
    except ImportError:
        raise InputError("--scheduler", "Dask is not installed: pip install 'serving-grader[dask]'") from None
    try:
        return Client(scheduler, timeout=DASK_CONNECT_TIMEOUT)
    except ValueError as e:              # http://..., no port: Dask's own words say which
        raise InputError(scheduler, f"not a Dask scheduler's address ({e})") from None
    except (OSError, TimeoutError) as e:
        raise InputError(scheduler, f"cannot reach the Dask scheduler ({e})") from None


class ClusterStopped(InputError):
    """The Dask cluster cannot go on grading the class (the scheduler gone, a worker that
    cannot confine a submission): no student's doing, so no one's error row. ``fix``: what
    must be true before the same command grades the rest."""

    def __init__(self, where: str, message: str, fix: str):
        super().__init__(where, message)
        self.fix = fix


def _dask(jobs: list[Job], client, args: tuple, scheduler: str) -> Outcome:
    from concurrent.futures import CancelledError
    from distributed import as_completed as dask_completed
    from grader.engine.sandbox.session import Unconfined
    secret = client.scatter(args[2], broadcast=True)   # sent once, not with every task
    task_args = (args[0], args[1], secret, *args[3:])
    futures = {client.submit(grade_one, *task_args, job.submission, pure=False): job
               for job in jobs}
    for future in dask_completed(list(futures)):
        try:
            result = future.result()
        except CancelledError as e:
            # The scheduler lost (or the client's connection to it): every submission not yet
            # back is cancelled. Recorded, each would be a 0 "the grader failed" row and the
            # run would end as if the class were graded; the class stops, as at Ctrl-C.
            why = getattr(e, "reason", "") or "cancelled"      # Dask's: scheduler-connection-lost
            raise ClusterStopped(scheduler, f"lost the Dask scheduler mid-class ({why})",
                                 "the scheduler running again, with its workers") from None
        except Unconfined as e:
            # A worker that cannot confine a submission refused it: the class is refused, as a
            # local grade is before it starts, not recorded as students the grader failed on
            # (every one of them, on a cluster of such workers).
            raise ClusterStopped(scheduler, f"a Dask worker {getattr(e, 'message', e)}",
                                 "every worker confining a submission") from None
        except Exception as e:
            yield futures[future], e
        else:
            yield futures[future], result


# ---------------------------------------------------------------------------- the batch

@dataclass(frozen=True)
class BatchSummary:
    lesson: str
    students: int                      # found in the folder
    graded: int                        # graded in this run
    skipped: int                       # already in the gradebook, not graded again
    failed: tuple[tuple[str, str], ...]   # (student, why)
    scores: tuple[float, ...]          # every graded result of the students found
    max_score: float
    elapsed_s: float
    workers: str
    gradebook: str = ""                # where the results went (its password masked)

    def to_dict(self) -> dict:
        d = {k: getattr(self, k) for k in ("lesson", "students", "graded", "skipped",
                                           "max_score", "elapsed_s", "workers", "gradebook")}
        d["failed"] = [{"student": s, "error": e} for s, e in self.failed]
        d["distribution"] = distribution(self.scores, self.max_score)
        return d

    def render(self) -> str:
        rate = self.graded / self.elapsed_s * 60 if self.elapsed_s > 0 else 0.0
        lines = [f"{self.lesson}: {plural(self.students, 'student')}: {self.graded} graded now, "
                 f"{self.skipped} already graded, {len(self.failed)} failed "
                 f"({self.elapsed_s:.1f} s, {rate:.0f} submissions/min, {self.workers})"]
        if self.gradebook:
            # The default gradebook is the course's, which need not be where the command ran.
            lines.append(f"gradebook: {self.gradebook}")
        dist = distribution(self.scores, self.max_score)
        if self.scores:
            lines.append(f"scores out of {self.max_score:g} ({len(self.scores)} graded): min "
                         f"{dist['min']:g}  median {dist['median']:g}  mean {dist['mean']:g}  "
                         f"max {dist['max']:g}")
            peak = max(b["count"] for b in dist["bins"]) or 1
            for b in dist["bins"]:
                bar = "#" * round(30 * b["count"] / peak)
                lines.append(f"  {b['label']:>11}  {bar:<30} {b['count']}")
        if self.failed:
            lines.append("failed:")
            lines += [f"  {s}: {e}" for s, e in self.failed]
        return terminal(lines)        # students are named by their files: the learner's text


def distribution(scores, max_score: float, bins: int = 10) -> dict:
    """Summary statistics and a histogram: ten equal bins below full marks, and full marks."""
    scores = sorted(scores)
    if not scores:
        return {"min": None, "median": None, "mean": None, "max": None, "bins": []}
    width = max_score / bins if max_score > 0 else 1.0
    counts = [0] * (bins + 1)
    for s in scores:
        counts[bins if s >= max_score else min(bins - 1, int(s // width))] += 1
    labels = [f"{i * width:g}-{(i + 1) * width:g}" for i in range(bins)] + [f"{max_score:g} (full)"]
    return {"min": scores[0], "median": statistics.median(scores),
            "mean": round(statistics.fmean(scores), 3), "max": scores[-1],
            "bins": [{"label": lab, "count": c} for lab, c in zip(labels, counts)]}


def rubric_info(rubric) -> LessonInfo:
    """The gradebook's view of a rubric: its lesson's total and criteria."""
    return LessonInfo(rubric.lesson, rubric.title, rubric.version,
                      round(sum(c.points for c in rubric.criteria), 4),
                      tuple(CriterionInfo(c.id, c.title, c.points, c.visibility) for c in rubric.criteria))


def refuse_changed_rubric(book: Gradebook, rubric) -> None:
    """A rubric edited without a new version would grade some students under one rubric and
    leave the others under another, all under one number, and resuming would not regrade
    the ones already done: refused before any work, naming what changed."""
    changed = book.rubric_conflict(rubric_info(rubric))
    if changed:
        raise InputError(str(rubric.path), f"changed since the gradebook's results of version "
                                           f"{rubric.version} ({changed}): raise its version to "
                                           "grade with it (every result is then graded again)")


def refuse_mixed_results(book: Gradebook, lesson: str, cases: str, grader: str,
                         secret_file: str) -> set:
    """Before any work: results of the lesson graded on other hidden cases or by other
    grading code would stand beside what this run records, the class's grades mixing two
    gradings until every student was graded again. Refused (the cases first: a mistyped
    --secret-file is the likelier mistake), unless --force regrades the whole class. The
    gradebook's graded keys of the lesson, read once, for the resume."""
    graded = book.graded_keys(lesson)
    _refuse_other_cases(book, lesson, cases, secret_file, graded)
    _refuse_other_grading_code(book, lesson, grader, graded)
    return graded


def _refuse_other_cases(book: Gradebook, lesson: str, cases: str, secret_file: str,
                        graded: set) -> None:
    """Another secret, or a grader that draws its cases otherwise."""
    other = sorted({key[0] for key in graded if key[3] != cases})
    if other:
        raise InputError(secret_file, (
            f"draws other hidden cases than {plural(len(other), f'{lesson} result')} in the "
            f"gradebook {book.shown_url} ({first_few(other)}) {_were(other)} graded on: another "
            f"secret, or a grader that draws its cases otherwise. With their secret, a class keeps "
            f"those results and grades only what is missing; with this one, grade the class "
            f"folder {_start_again(lesson)}"))


def _refuse_other_grading_code(book: Gradebook, lesson: str, grader: str, graded: set) -> None:
    """grader.engine.fingerprint: an upgrade since, or a worker with another copy."""
    theirs = {key[0]: key[4] or "unrecorded" for key in graded if key[4] != grader}
    if theirs:
        other, versions = sorted(theirs), sorted(set(theirs.values()))
        raise InputError(book.shown_url, (
            f"{plural(len(other), f'{lesson} result')} ({first_few(other)}) {_were(other)} graded "
            f"by other grading code ({first_few(versions)}) than this grader's ({grader}): graded "
            f"on top of them, the class would hold the grades of two graders. Grade the class "
            f"folder {_start_again(lesson, ' by this grader')}"))


def _were(students: list) -> str:
    return "was" if len(students) == 1 else "were"


def _start_again(lesson: str, by: str = "") -> str:
    """The two ways past a refusal of some results in the gradebook, said once for each
    refusal: every student graded again, or those results removed first."""
    return (f"with --force (every student graded again{by}), or first remove those results "
            f"(grader gradebook forget STUDENT --lesson {lesson})")


def how_to_go_on(force: bool) -> str:
    """What a class grade stopped part way says of its next run: every result it recorded
    is kept, and a run without --force passes over them. Under --force, the same command
    grades every student again (and one without it may refuse the results not yet regraded,
    if they are of other grading code or cases)."""
    return ("--force grades every student again, so the same command starts over (without it, "
            "a run grades only the rest, and refuses while results of another grader or secret remain)"
            if force else "the same command grades the rest")


def pending(entry: Entry, submission: Submission, done: set, rubric_version: int,
            cases: str, grader: str) -> bool:
    """Resuming: does this submission still need grading? Only a graded result of the same
    file (digest), under the same rubric version, on the same cases (so the same secret)
    and by the same grading code counts as done; a changed file or rubric is graded again
    (other cases or code are refused before, by refuse_mixed_results, unless the class is
    forced)."""
    return (entry.student, submission.digest, rubric_version, cases, grader) not in done


def run_batch(lesson: str, folder: Path, course: Course, secret: bytes, book: Gradebook, *,
              jobs: int | None = None, force: bool = False, scheduler: str | None = None,
              progress: bool = True, stream=None, unconfined_ok: bool = False,
              secret_file: str = "--secret-file") -> BatchSummary:
    """``unconfined_ok``: grade even where the sandbox cannot confine a submission (the
    instructor's explicit choice); otherwise a class that could not be confined refuses
    before any work. ``secret_file``: how to name the secret when it draws other cases
    than the gradebook's results were graded on."""
    from grader.engine.checks import REGISTRY
    from grader.lessons import lesson_module
    from grader.engine.pipeline import build_cases, folder_files
    from grader.engine.rubric import load_rubric

    started = time.monotonic()
    if not unconfined_ok and folder_files(lesson) is None and not scheduler:
        # Before any work: a class is refused whole, not one student at a time. (A Dask
        # cluster's workers check for themselves, in every grade.)
        from grader.engine.sandbox.session import require_confinement
        require_confinement()
    lesson_module(lesson)
    rubric = load_rubric(course.rubric_path(lesson), REGISTRY)
    expected_rubric = rubric_digest(course, lesson)     # the rubric every worker grades with
    refuse_changed_rubric(book, rubric)
    expected_cases = cases_digest([c.summary() for c in build_cases(lesson, course, secret)])
    grader = grading_version()
    # The gradebook's graded results of the lesson, read once: what a resume passes over
    # (none under --force) and who keeps a grade their file can no longer earn (_Failures).
    graded = book.graded_keys(lesson) if force else refuse_mixed_results(
        book, lesson, expected_cases, grader, secret_file)
    done = set() if force else graded
    if not force:
        # A result damaged by hand is refused now, naming it, not in the summary after the
        # whole class was graded (--force writes every student's again).
        book.results(lesson)
    info = replace(rubric_info(rubric), criteria=())     # an error row's lesson: its totals only
    # The gradebook kept in the class folder is no student (nor are SQLite's files beside it):
    # recorded, it would be three students with 0 points in every export.
    own = book.own_files()
    entries = [e for e in discover(folder, lesson, course) if Path(os.path.realpath(e.path)) not in own]
    refuse_a_folder_of_no_submissions(entries, Path(folder), lesson)

    # Before anything is recorded: a cluster that cannot be reached refuses the class whole,
    # rather than leaving each unreadable submission's error row behind it.
    with _cluster(scheduler) as client:
        # Who holds a graded result of the lesson: a submission of theirs that cannot be
        # graded now (emptied, gone, unreadable, or the grader failing on it) keeps it.
        fail = _Failures(book, info, {key[0] for key in graded})
        todo, skipped = _read_entries(
            entries, Path(folder), lesson, fail,
            to_grade=lambda e, sub: pending(e, sub, done, rubric.version, expected_cases, grader))
        n = max(1, jobs if jobs is not None else (os.cpu_count() or 1))
        args = (str(course.root), lesson, secret, expected_cases, expected_rubric, grader,
                unconfined_ok)
        if scheduler:
            outcomes, workers = _dask(todo, client, args, scheduler), f"Dask at {scheduler}"
        elif n == 1 or len(todo) <= 1:
            outcomes, workers = _inline(todo, lambda s: grade_one(*args, s)), "1 process"
        else:
            n = min(n, len(todo))
            outcomes, workers = _local_pool(todo, n, args), f"{n} processes"
        bar = Progress(len(todo), f"grading {lesson}", stream=stream, enabled=progress, heartbeat_s=1.0)
        graded = _record_outcomes(outcomes, len(todo), book, fail, bar, force)

    students = {e.student for e in entries}
    scores = tuple(r.score for r in book.results(lesson)
                   if r.status == "graded" and r.student in students)
    return BatchSummary(lesson=lesson, students=len(entries), graded=graded, skipped=skipped,
                        failed=tuple(sorted(fail.failed)), scores=scores, max_score=info.max_score,
                        elapsed_s=round(time.monotonic() - started, 3), workers=workers,
                        gradebook=book.shown_url)


class _Failures:
    """The submissions of a run that could not be graded, each as (student, why), and
    recorded as an error row (0 points, retried next run), unless the student holds a graded
    result of the lesson (``graded``): a file emptied or gone since (a sync cut short), a
    second file handed in late, or the grader failing on it would replace their grade and
    its report for good. That result is kept, and the summary says so."""

    KEPT = "their graded result in the gradebook is kept (grader gradebook forget removes it)"

    def __init__(self, book: Gradebook, info: LessonInfo, graded: set):
        self.book, self.info, self.graded = book, info, graded
        self.failed: list[tuple[str, str]] = []

    def __call__(self, student: str, shown: str, why: str, digest: str = "") -> None:
        if student in self.graded:
            self.failed.append((student, f"{shown}: {why}; {self.KEPT}"))
            return
        self.failed.append((student, f"{shown}: {why}"))
        self.book.record_error(student, self.info, shown, why, digest)


def _read_entries(entries: list, folder: Path, lesson: str, fail: _Failures,
                  to_grade) -> tuple[list, int]:
    """Each student's file read: (the jobs ``to_grade`` keeps, and how many it passed over
    as graded already); one that could not be read goes to ``fail``."""
    from grader.engine.pipeline import folder_files

    todo: list[Job] = []
    skipped = 0
    root = class_root(folder)
    for e in entries:
        shown = within(e.path, root)
        if e.problem:
            fail(e.student, shown, e.problem)
            continue
        try:
            sub = load_submission(Path(e.path), folder_files(lesson), e.student, links_within=root)
        except InputError as err:
            fail(e.student, shown, err.message)
            continue
        # Read; from here it is named, not opened.
        sub = replace(sub, path=shown, notes=((e.note,) if e.note else ()) + sub.notes)
        if to_grade(e, sub):
            todo.append(Job(e.student, sub))
        else:
            skipped += 1
    return todo, skipped


def _stopped(why: str, graded: int, total: int, force: bool, fix: str) -> str:
    """A class stopped part way, in one line: why, how far it got, and how it goes on."""
    return (f"{why}; stopped after {graded} of {total} results this run, and every result "
            f"written is kept: once that is fixed ({fix}), {how_to_go_on(force)}")


def _record_outcomes(outcomes, total: int, book: Gradebook, fail: _Failures, bar, force: bool) -> int:
    """Each grade into the gradebook as it comes (a grader that failed goes to ``fail``); how
    many were recorded as graded. ``force``: the run grades every student again (what its
    next run does, said when a write fails)."""
    graded = 0
    try:
        for job, result in outcomes:
            if isinstance(result, BaseException):
                fail(job.student, job.submission.path,
                     f"{GRADER_FAILED}: {type(result).__name__}: {result}", job.submission.digest)
            else:
                book.record(job.student, result)
                graded += 1
            bar.advance()
    except GradebookWriteError as e:
        # A full disk mid-class, or a lock held too long: stop cleanly (the pool's workers
        # are stopped on the way out); every result already written stays, and a re-run
        # grades only the rest.
        bar.finish()
        raise GradebookWriteError(e.where, _stopped(e.message, graded, total, force,
                                                    "space freed, the lock let go")) from None
    except ClusterStopped as e:
        bar.finish()
        raise ClusterStopped(e.where, _stopped(e.message, graded, total, force, e.fix), e.fix) from None
    finally:
        outcomes.close()        # stopped early: the workers stop too, now
        bar.finish()            # an interrupt too: the heartbeat stops before anything is said
    return graded

"""Mutation testing and coverage of the course's ground truth (docs/testing.md).

    python bench/mutation.py run [MODULE ...] [--fresh] [--survivors]   # mutants, module by module
    python bench/mutation.py run --rev REV                               # ... of an older commit
    python bench/mutation.py report                                      # bench/mutation-report.md again
    python bench/mutation.py named [NAME ...]                            # the planted bugs of mutation.toml
    python bench/mutation.py coverage [PYTEST ARGS ...]                  # the suite under coverage.py

`run` mutates each module of bench/mutation.toml with cosmic-ray (its operators and its
session database), one mutant at a time, in a scratch copy of the repository (the working
tree never holds a mutant, even when the run is killed), and runs the module's own test
files against it, stopping at the first failure. Each mutant's tests run in a child forked
from a process that has imported pytest and the third-party libraries but nothing of the
project, so a mutant costs its tests and not a fresh interpreter's imports (about 2 s of
CPU each, thousands of times over); the project is imported afresh, mutated, in each child.
And a mutant runs first the tests that run its line: the module's tests are run once
unmutated under coverage.py with a context per test, so a mutant of a line no test runs
survives without running anything, one of a line run only at import runs them all, and a
mutant that survives the tests of its line is run against all of them before it counts.
Sessions are kept in .mutation/ and resumed (one run per module at a time: a second is left
out); --fresh starts a module over, --survivors
runs its survivors again (after new tests were written); --rev measures a commit's code and
tests instead of the working tree (the score before a change). A surviving mutant must be killed
by a test or listed in bench/mutation-equivalent.txt with the reason it cannot be; the
report (bench/mutation-report.md) counts killed, survived and equivalent per module and
shows each unexplained survivor's diff. Everything runs under `nice -n 19`: the machine is
shared.

Sessions are not committed (.mutation/ is ignored), so each module's latest result is:
`run`, when it finishes or is stopped, and `report` save each local session's result as
bench/mutation-results/<module slug>.json (the sha256 of the module, of its listed test files
and of its lines of mutation-equivalent.txt; the commit and date measured; the counts; each
unexplained survivor's id and diff), left alone when nothing in it changed. The report shows
a module's local session, else its committed summary, whichever measured the module as it
is; a result whose module or equivalent entries have changed since is shown as stale and
not counted (run the module again), one whose tests have changed is counted, with a note.

`coverage` runs the test suite under coverage.py, subprocesses and forked workers included,
measuring reference/ and grader/, and writes the lines no test runs to
bench/coverage-unrun.txt (the sandbox child's own code runs where coverage cannot follow:
see docs/testing.md).
"""
from __future__ import annotations

import argparse
import ast
import datetime
import functools
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "bench" / "mutation.toml"
EQUIVALENT = ROOT / "bench" / "mutation-equivalent.txt"
REPORT = ROOT / "bench" / "mutation-report.md"
UNRUN = ROOT / "bench" / "coverage-unrun.txt"
STATE = ROOT / ".mutation"
# Each module's latest result, committed (.mutation/ is not): what `report` shows on a checkout
# without sessions.
RESULTS = "bench/mutation-results"
COUNTED = ("killed", "survived", "equivalent", "pending")
NICE = ["nice", "-n", "19"]
NOT_RUN = "no test of this module runs this line"
# cosmic-ray's own operator failing on a construct it does not expect (its exception
# replacer on `except (A, *more)`): the mutant does not exist, so it is neither killed nor
# survived, and the report says how many there were.
NOT_MADE = "cosmic-ray could not make this mutant"
# Deterministic hypothesis runs: a mutant is killed or not, never by luck (tests/conftest.py).
# And one random secret for every run: tests/conftest.py draws it when the environment has
# none and puts it in the tests' ids (test_x[random-...]), so each forked child drew its own,
# the ids the unmutated run recorded were not found in a mutant's run, and pytest's "not
# found" error counted as a kill (643 of key_search.py's 703 kills on 2026-12-05).
# The second fixed secret too (tests/conftest.py), as every run held it when the committed
# results were measured: a run is deeper than CI's.
TEST_ENV = {"HYPOTHESIS_PROFILE": "mutation", "PYTHONDONTWRITEBYTECODE": "1",
            "GRADER_TEST_SECRET": "6d75746174696f6e", "GRADER_TEST_EVERY_SECRET": "1"}
# pytest's words for a test named on its command line that it did not collect: the tool's
# own failure, never a mutant's kill.
NOT_FOUND = "ERROR: not found: "
# A test taking that secret (tests/conftest.py's `secret` fixture, or a fixture of its own
# that takes it) had a random id in every run before the secret was fixed: a result measured
# then, whose module's tests hold one, may count such "not found" errors as kills.
TAKES_SECRET = re.compile(r"^\s*def \w+\([^)]*\bsecret\b", re.M)
BEFORE_FIXED_SECRET = "before the fixed test secret: kills may count tests not found, run it --fresh"


# ---------------------------------------------------------------------------- configuration

@dataclass(frozen=True)
class Module:
    path: str
    tests: tuple[str, ...]
    only: tuple[str, ...] = ()

    @property
    def slug(self) -> str:
        return self.path.replace("/", ".").removesuffix(".py")


def load_config(root: Path = ROOT, missing_tests_ok: bool = False) -> tuple[dict, list[Module], list[dict]]:
    """The tool's settings, the modules and the named mutants. A test file that does not
    exist is an error (a typo would silently weaken a module's tests), unless asked to
    measure an older tree that lacks some (``--missing-tests-ok``)."""
    data = tomllib.loads(CONFIG.read_text())
    modules = []
    for m in data["module"]:
        if not (root / m["path"]).is_file():
            sys.exit(f"{CONFIG.name}: no such module {m['path']}")
        tests = tuple(t for t in m["tests"] if (root / t.split("::")[0]).is_file())
        missing = set(m["tests"]) - set(tests)
        if missing and not missing_tests_ok:
            sys.exit(f"{CONFIG.name}: {m['path']}: no such test file {', '.join(sorted(missing))}")
        modules.append(Module(m["path"], tests, tuple(m.get("only", ()))))
    return data["tool"], modules, data.get("named", [])


# In this process, without xdist workers: pyproject.toml's addopts spread the suite over every
# core, and a mutant's tests would run in workers that neither coverage's per-test contexts
# nor the forked mutant's timeout reach (and two mutation runs would want four cores).
PYTEST_ARGS = ("-x", "-q", "-p", "no:cacheprovider", "-n", "0")


def test_command(tests) -> list[str]:
    return [sys.executable, "-m", "pytest", *PYTEST_ARGS, *tests]


# ---------------------------------------------------------------------------- a mutant's identity

def definitions(source: str) -> list[tuple[int, int, str]]:
    """(first line, last line, qualified name) of every function and class, innermost last."""
    found = []

    def walk(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                start = min([child.lineno] + [d.lineno for d in child.decorator_list])
                found.append((start, child.end_lineno, name))
                walk(child, name + ".")
            else:
                walk(child, prefix)
    walk(ast.parse(source), "")
    return found


def signature_annotations(source: str) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """(start, end) positions of the annotations of function signatures, in a module whose
    annotations are never evaluated (``from __future__ import annotations``): a mutant
    there (``str | Path`` -> ``str - Path``) changes nothing that runs."""
    tree = ast.parse(source)
    if not any(isinstance(n, ast.ImportFrom) and n.module == "__future__"
               and any(a.name == "annotations" for a in n.names) for n in tree.body):
        return []
    spans = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            every = args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]
            notes = [a.annotation for a in every if a is not None and a.annotation is not None]
            notes += [node.returns] if node.returns is not None else []
            spans += [((n.lineno, n.col_offset), (n.end_lineno, n.end_col_offset)) for n in notes]
    return spans


def enclosing(defs, line: int) -> str:
    inside = [d for d in defs if d[0] <= line <= d[1]]
    return max(inside, key=lambda d: d[0])[2] if inside else "(module)"


def in_region(qualname: str, only) -> bool:
    return not only or any(qualname == o or qualname.startswith(o + ".") for o in only)


@dataclass(frozen=True)
class Mutant:
    """What names a mutant across runs: module, function, operator, the line's text, and
    which of the operator's mutants on that line it is (#2, #3 ...)."""
    module: str
    function: str
    operator: str
    line_text: str

    def key(self) -> str:
        return f"{self.module} | {self.function} | {self.operator} | {self.line_text}"


def identify(root: Path, module: Module, items) -> dict[str, Mutant]:
    """job id -> Mutant for a session's work items (one mutation each)."""
    source = (root / module.path).read_text()
    lines, defs = source.splitlines(), definitions(source)
    ordered = sorted(items, key=lambda it: (it.mutations[0].start_pos, it.mutations[0].operator_name,
                                           it.mutations[0].occurrence))
    seen: Counter = Counter()
    out = {}
    for item in ordered:
        m = item.mutations[0]
        line = m.start_pos[0]
        op = m.operator_name.removeprefix("core/")
        base = (enclosing(defs, line), op, lines[line - 1].strip())
        seen[base] += 1
        if seen[base] > 1:
            op = f"{op}#{seen[base]}"
        out[item.job_id] = Mutant(module.path, base[0], op, base[2])
    return out


def read_equivalent() -> dict[str, str]:
    """key -> why, from bench/mutation-equivalent.txt (module | function | operator | line | why)."""
    found = {}
    if not EQUIVALENT.is_file():
        return found
    for n, raw in enumerate(EQUIVALENT.read_text().splitlines(), 1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        # The line's text may hold " | " itself (`int | None`); the reason may not.
        head = raw.split(" | ", 3)
        parts = [p.strip() for p in head[:3] + head[3].rsplit(" | ", 1)] if len(head) == 4 else []
        if len(parts) != 5 or not parts[4]:
            sys.exit(f"{EQUIVALENT.name} line {n}: expected 'module | function | operator | "
                     f"line | why', got {raw!r}")
        found[" | ".join(parts[:4])] = parts[4]
    return found


# ---------------------------------------------------------------------------- what is measured

@dataclass(frozen=True)
class Source:
    """The code and tests measured: the working tree, or a commit exported once."""
    root: Path          # where its files are read
    state: Path         # where its sessions are kept
    label: str

    @property
    def report(self) -> Path:
        return REPORT if self.root == ROOT else self.state / "mutation-report.md"


def source_of(rev: str | None) -> Source:
    if rev is None:
        return Source(ROOT, STATE, "the working tree")
    sha = subprocess.run(["git", "rev-parse", "--short", rev], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout.strip()
    state = STATE / f"rev-{sha}"
    export = state / "export"
    if not export.is_dir():
        export.mkdir(parents=True)
        archive = subprocess.run(["git", "archive", sha], cwd=ROOT, capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(export)], input=archive.stdout, check=True)
    return Source(export, state, f"commit {sha}")


# ---------------------------------------------------------------------------- running cosmic-ray

def scratch_copy(source: Source, dest: Path) -> None:
    """The source's files in ``dest``: for the working tree, those tracked and new (not ignored)."""
    if dest.exists():
        shutil.rmtree(dest)
    if source.root != ROOT:
        shutil.copytree(source.root, dest)
        return
    listed = subprocess.run(["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


PRELOAD = ("numpy", "yaml", "jsonschema", "sqlalchemy", "hypothesis", "pytest")


def preload() -> None:
    """Import what every test run needs and the project does not define, once, before any
    child is forked. The project itself is never imported here: each child imports it
    from the scratch tree, with its mutant."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")    # no BLAS threads across fork()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    for name in PRELOAD:
        __import__(name)
    assert not any(m == "grader" or m.startswith(("grader.", "reference")) for m in sys.modules)


def run_tests_forked(tree: Path, tests, timeout: float, contexts_of=None) -> tuple[str, str]:
    """("survived" | "killed" | "timeout", output) of the tests run in a forked child. With
    ``contexts_of=(module files, json path)``, the run is measured by coverage.py and the
    tests that ran each line of those files are written to the json file."""
    scratch = Path(tempfile.mkdtemp(prefix="mutant-"))
    # Searchable by others, as /tmp is: a sandbox test runs a child as nobody in a folder
    # of its own beneath it (mkdtemp's 0700 refused it the path, and the unmutated run failed).
    scratch.chmod(0o711)
    log = scratch / "output.txt"
    pid = os.fork()
    if pid == 0:                                      # the child: never returns
        code = 70
        try:
            os.setsid()                               # one group: a hang is killed whole
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            os.chdir(tree)
            sys.path.insert(0, str(tree))
            os.environ.update(TEST_ENV, TMPDIR=str(scratch))
            # The variable reaches the tests' subprocesses only: this child is a fork, whose
            # interpreter read it at its start. Writing bytecode, a mutant of the same size as
            # the one before, written within the same second, ran the earlier one's cached
            # code (a .pyc is keyed by its source's size and mtime in whole seconds).
            sys.dont_write_bytecode = True
            tempfile.tempdir = str(scratch)           # every temporary file of the run goes here
            import pytest
            cov, plugins = None, []
            if contexts_of is not None:
                import coverage
                cov = coverage.Coverage(data_file=None, include=[str(f) for f in contexts_of[0]],
                                        config_file=False)
                cov.start()

                took = {}

                class PerTest:     # each test's setup, call and teardown under its node id
                    @pytest.hookimpl(hookwrapper=True)
                    def pytest_runtest_protocol(self, item, nextitem):
                        cov.switch_context(item.nodeid)
                        t0 = time.perf_counter()
                        yield
                        took[item.nodeid] = time.perf_counter() - t0
                        cov.switch_context("")
                plugins.append(PerTest())
            code = int(pytest.main([*PYTEST_ARGS, "--basetemp", str(scratch / "pytest"), *tests],
                                   plugins=plugins))
            if cov is not None:
                cov.stop()
                data = cov.get_data()
                contexts_of[1].write_text(json.dumps({"took": took, "lines": {
                    os.path.relpath(f, tree): {k: sorted(v) for k, v in
                                               data.contexts_by_lineno(str(f)).items()}
                    for f in contexts_of[0]}}))
        except BaseException:                         # noqa: BLE001 - report, never return
            import traceback
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    deadline = time.monotonic() + timeout
    outcome = None
    try:
        while outcome is None:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                outcome = "survived" if os.waitstatus_to_exitcode(status) == 0 else "killed"
            elif time.monotonic() > deadline:
                _kill(pid)
                outcome = "timeout"
            else:
                time.sleep(0.05)
    except BaseException:
        _kill(pid)          # a stopped run (Ctrl-C, SIGTERM) leaves no child in its own session
        raise
    output = log.read_text(errors="replace")[-4000:] if log.is_file() else ""
    shutil.rmtree(scratch, ignore_errors=True)
    return outcome, output


def _kill(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    os.waitpid(pid, 0)


def tree_digest(tree: Path) -> str:
    """What a baseline depends on: the code and the tests of the scratch tree."""
    h = hashlib.sha256()
    for path in sorted(p for top in ("reference", "grader", "tests") for p in (tree / top).rglob("*")
                       if p.is_file() and "__pycache__" not in p.parts):
        h.update(str(path.relative_to(tree)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def baseline(source: Source, tree: Path, module: Module,
             modules: list[Module]) -> tuple[float, dict[int, set[str]], dict[str, float]]:
    """The module's tests, unmutated, under coverage.py: (seconds, line -> the tests that
    ran it, "" for lines run while importing, test -> its seconds). One run serves every
    module tested by the same files (the worker's modules), as long as nothing changed."""
    key = hashlib.sha256(repr(("v4", module.tests)).encode()).hexdigest()[:12]   # v4: one fixed test secret
    cache = source.state / "baselines" / f"{tree_digest(tree)[:24]}-{key}.json"
    if not cache.is_file():
        shared = [m.path for m in modules if m.tests == module.tests]
        found = tree.parent / "lines.json"
        found.unlink(missing_ok=True)
        t0 = time.monotonic()
        outcome, output = run_tests_forked(tree, module.tests, 3600,
                                           contexts_of=([tree / p for p in shared], found))
        if outcome != "survived" or not found.is_file():
            sys.exit(f"{module.path}: its tests fail without any mutant; fix them first:\n{output[-3000:]}")
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps({"seconds": time.monotonic() - t0, **json.loads(found.read_text())}))
    data = json.loads(cache.read_text())
    lines = {int(k): set(v) for k, v in data["lines"].get(module.path, {}).items()}
    return data["seconds"], lines, data["took"]


def tests_of(module: Module, contexts: set[str], took: dict[str, float]) -> list[str]:
    """The tests (node ids) that ran a line, the quickest first (the first to fail ends the
    run); all the module's tests for a line run while importing (a default value, a class
    body), which every test depends on."""
    if "" in contexts or not contexts:
        return list(module.tests)
    return sorted(contexts, key=lambda t: (took.get(t, 0.0), t))


def run_timeout(tests, module: Module, took: dict[str, float], tool: dict, whole: float) -> float:
    """How long a mutant's run may take before it counts as a hang: timeout-factor times
    what its tests took unmutated, at least timeout-min-s and at most the whole list's limit
    (``whole``), which the whole list gets. A loop in a line that a few quick tests run is a
    hang after a minute, not after four times every test of the module (15 minutes for
    submission.py's notebook scanner)."""
    if list(tests) == list(module.tests):
        return whole
    spent = sum(took.get(t, 0.0) for t in tests)
    return min(whole, max(tool.get("timeout-min-s", 60), tool.get("timeout-factor", 4) * spent))


@functools.lru_cache(maxsize=4)        # one module's source, parsed once for all its mutants
def statement_starts(source: str) -> dict[int, int]:
    """Each line's innermost enclosing statement's first line. coverage.py records a
    statement that spans lines on the lines its bytecode names, not on every line: a tuple
    on the eighth line of a dict literal had no coverage, so its mutants were called
    survivors that no test runs. A mutant is run by the tests that run its statement."""
    starts: dict[int, int] = {}
    for node in ast.walk(ast.parse(source)):      # outer statements first: inner ones overwrite
        if isinstance(node, ast.stmt):
            for line in range(node.lineno, (node.end_lineno or node.lineno) + 1):
                starts[line] = node.lineno
    return starts


def exec_session(session: Path, tree: Path, module: Module, timeout: float,
                 lines: dict[int, set[str]], took: dict[str, float], tool: dict | None = None) -> None:
    """Run every pending mutant of the session (cosmic-ray's mutation, our runner), each
    against the tests that run its line (within run_timeout of them), then all of the
    module's tests (within ``timeout``)."""
    import cosmic_ray.plugins
    from cosmic_ray.mutating import MutationVisitor, _make_diff
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome, WorkResult

    with use_db(str(session), WorkDB.Mode.open) as db:
        pending = list(db.pending_work_items)
        for n, item in enumerate(pending, 1):
            (m,) = item.mutations
            path = tree / m.module_path
            original = path.read_text()
            operator = cosmic_ray.plugins.get_operator(m.operator_name)(**(m.operator_args or {}))
            try:
                mutated = MutationVisitor.mutate_code(original, operator, m.occurrence)
            except Exception as e:      # noqa: BLE001 - the tool's bug, recorded, not fatal
                db.set_result(item.job_id, WorkResult(output=f"{NOT_MADE}: {type(e).__name__}: {e}",
                                                      worker_outcome=WorkerOutcome.EXCEPTION))
                continue
            if mutated is None:
                db.set_result(item.job_id, WorkResult(worker_outcome=WorkerOutcome.NO_TEST))
                continue
            diff = "\n".join(_make_diff(original, mutated, m.module_path))
            first = statement_starts(original).get(m.start_pos[0], m.start_pos[0])
            covering = set().union(*(lines.get(n, set()) for n in range(first, m.end_pos[0] + 1)))
            if not covering:
                db.set_result(item.job_id, WorkResult(
                    output=NOT_RUN, diff=diff, test_outcome=TestOutcome.SURVIVED,
                    worker_outcome=WorkerOutcome.NORMAL))
                continue
            path.write_text(mutated)
            try:
                chosen = tests_of(module, covering, took)
                outcome, output = run_tests_forked(tree, chosen,
                                                   run_timeout(chosen, module, took, tool or {}, timeout))
                if outcome == "survived" and chosen != list(module.tests):
                    # The tests that ran its line missed it: all of them must miss it too
                    # (a shared fixture runs for the first test that needs it only).
                    outcome, output = run_tests_forked(tree, module.tests, timeout)
            finally:
                path.write_text(original)
            if outcome == "killed" and NOT_FOUND in output:
                sys.exit(f"{module.path}: a test the unmutated run recorded was not collected in a "
                         f"mutant's run (its id changed between runs?): {output[output.index(NOT_FOUND):][:300]}")
            db.set_result(item.job_id, WorkResult(
                output="timeout" if outcome == "timeout" else output,
                diff=diff,
                test_outcome=TestOutcome.SURVIVED if outcome == "survived" else TestOutcome.KILLED,
                worker_outcome=WorkerOutcome.NORMAL))
            if n % 25 == 0 or n == len(pending):
                print(f"  {module.path}: {n}/{len(pending)}", flush=True)


def write_session_config(path: Path, module: Module, timeout: float) -> None:
    cmd = " ".join(test_command(module.tests))
    path.write_text(
        "[cosmic-ray]\n"
        f'module-path = "{module.path}"\n'
        f"timeout = {timeout:.0f}\n"
        "excluded-modules = []\n"
        f"test-command = '{cmd}'\n\n"
        "[cosmic-ray.distributor]\n"
        'name = "local"\n')


def skip(db, job_id: str, why: str) -> None:
    from cosmic_ray.work_item import WorkerOutcome, WorkResult
    db.set_result(job_id, WorkResult(output=why, worker_outcome=WorkerOutcome.SKIPPED))


def prepare(db, source: Source, module: Module, tool: dict, equivalent: dict) -> None:
    """Skip what this practice does not mutate (operators, outside `only`) and what is
    recorded as equivalent, before any mutant runs."""
    from cosmic_ray.work_item import TestOutcome
    excluded = re.compile("|".join(f"(?:{e})" for e in tool.get("exclude-operators", ())) or "(?!)")
    items = list(db.work_items)
    done = {item.job_id: result for item, result in db.completed_work_items}
    names = identify(source.root, module, items)
    notes = signature_annotations((source.root / module.path).read_text())
    for item in items:
        mutant, m = names[item.job_id], item.mutations[0]
        if excluded.match(m.operator_name):
            why = "filtered: operator"
        elif any(a <= tuple(m.start_pos) and tuple(m.end_pos) <= b for a, b in notes):
            why = "filtered: an annotation, never evaluated"
        elif not in_region(mutant.function, module.only):
            why = "filtered: outside the mutated region"
        elif mutant.key() in equivalent:
            why = "equivalent: " + equivalent[mutant.key()]
        else:
            continue
        # Filters apply to finished mutants too (a rule added later counts for them); an
        # equivalence, only to mutants not killed (a killed one was not equivalent).
        result = done.get(item.job_id)
        if result is None or (result.output or "") != why and not (
                why.startswith("equivalent") and result.test_outcome == TestOutcome.KILLED):
            skip(db, item.job_id, why)


def run_module(source: Source, module: Module, modules: list[Module], tool: dict, *, fresh: bool,
               survivors: bool) -> None:
    """One run at a time per module: two would share its session, and each would record its
    mutants' outcomes under the other's ids (killed mutants then show as survivors). The
    lock is beside the module's state folder, which --fresh removes."""
    import fcntl
    source.state.mkdir(parents=True, exist_ok=True)
    with open(source.state / f"{module.slug}.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"{module.path}: another run is measuring it now: left out", flush=True)
            return
        _run_module(source, module, modules, tool, fresh=fresh, survivors=survivors)


def _run_module(source: Source, module: Module, modules: list[Module], tool: dict, *, fresh: bool,
                survivors: bool) -> None:
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome

    if not module.tests:
        print(f"{module.path}: no test file to run: left out")
        return
    state = source.state / module.slug
    tree, session, config = state / "tree", state / "session.sqlite", state / "config.toml"
    if fresh and state.exists():
        shutil.rmtree(state)
    state.mkdir(parents=True, exist_ok=True)
    scratch_copy(source, tree)          # the current code and tests, every time
    # What the committed summary will say this run measured: the commit and the tests copied.
    measured = {"commit": commit_label(source), "tests_sha256": fingerprint(tree, module)["tests_sha256"]}
    write_session_config(config, module, tool.get("timeout-min-s", 60))   # what cosmic-ray init reads
    stamp = hashlib.sha256((source.root / module.path).read_bytes()).hexdigest()
    stamp_file = state / "source.sha256"
    if session.exists() and (not stamp_file.is_file() or stamp_file.read_text() != stamp):
        print(f"{module.path}: the module changed since its session began: starting over")
        session.unlink()
    if not session.exists():
        # Every result of a session begun here is measured under the fixed test secret.
        (state / "test_secret").write_text("fixed")
        subprocess.run([sys.executable, "-m", "cosmic_ray.cli", "init", str(config), str(session)],
                       cwd=tree, check=True)
        stamp_file.write_text(stamp)
    equivalent = read_equivalent()
    with use_db(str(session), WorkDB.Mode.open) as db:
        if survivors:
            # Forget the survivors' results (and what is now recorded as equivalent), so exec
            # runs them again against the current tests.
            again = [item for item, result in db.completed_work_items
                     if result.test_outcome == TestOutcome.SURVIVED
                     or (result.output or "").startswith("equivalent: ")]
            _forget(session, [item.job_id for item in again])
        prepare(db, source, module, tool, equivalent)
        pending = db.num_work_items - db.num_results
    if not pending:
        print(f"{module.path}: no mutant to run", flush=True)
        return
    seconds, lines, took = baseline(source, tree, module, modules)
    timeout = max(tool.get("timeout-min-s", 60), tool.get("timeout-factor", 4) * seconds)
    if (state / "test_secret").is_file():
        measured["test_secret"] = "fixed"
    (state / "measured.json").write_text(json.dumps(measured))
    print(f"{module.path}: {pending} mutants to run (tests: {seconds:.1f} s unmutated, timeout "
          f"{timeout:.0f} s)", flush=True)
    exec_session(session, tree, module, timeout, lines, took, tool)


def _forget(session: Path, job_ids) -> None:
    import sqlite3
    with sqlite3.connect(session) as conn:
        conn.executemany("DELETE FROM work_results WHERE job_id = ?", [(j,) for j in job_ids])


# ---------------------------------------------------------------------------- the report

def tally(source: Source, module: Module):
    """(counts, survivors) of a module's session: survivors are (key, diff, not run)."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome

    session = source.state / module.slug / "session.sqlite"
    counts = Counter()
    survivors = []
    if not session.exists():
        return None, []
    equivalent = read_equivalent()
    with use_db(str(session), WorkDB.Mode.open) as db:
        items = list(db.work_items)
        names = identify(source.root, module, items)
        results = dict((item.job_id, result) for item, result in db.completed_work_items)
    for item in items:
        mutant, result = names[item.job_id], results.get(item.job_id)
        if result is None:
            counts["pending"] += 1
        elif result.worker_outcome == WorkerOutcome.SKIPPED:
            # Filtered mutants are not counted; one skipped as equivalent whose entry is gone
            # must run again (`run --survivors`).
            if (result.output or "").startswith("equivalent: "):
                counts["equivalent" if mutant.key() in equivalent else "pending"] += 1
        elif result.test_outcome == TestOutcome.SURVIVED:
            if mutant.key() in equivalent:
                counts["equivalent"] += 1
            else:
                counts["survived"] += 1
                survivors.append((mutant.key(), result.diff or "", result.output == NOT_RUN))
        elif result.worker_outcome == WorkerOutcome.NO_TEST:
            counts["no mutation"] += 1
        elif (result.output or "").startswith(NOT_MADE):
            counts["not made"] += 1
        else:
            counts["killed"] += 1      # a failing test, a crash or a hang (timeout)
    return counts, survivors


def commit_label(source: Source) -> str:
    if source.root != ROOT:
        return source.label.removeprefix("commit ")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                           capture_output=True, text=True).stdout.strip()
    return f"{commit}{' (with uncommitted changes)' if dirty else ''}"


def fingerprint(root: Path, module: Module) -> dict:
    """What a module's result depends on: its source, its test files (as listed) and its
    lines of bench/mutation-equivalent.txt, each as a sha256."""
    def sha(data: bytes) -> str:
        return hashlib.sha256(data).hexdigest()
    files = sorted({t.split("::")[0] for t in module.tests})
    tests = repr(module.tests).encode() + b"".join(
        f.encode() + b"\0" + (root / f).read_bytes() + b"\0" for f in files)
    mine = sorted(line.strip() for line in (EQUIVALENT.read_text().splitlines() if EQUIVALENT.is_file() else [])
                  if line.startswith(module.path + " | "))
    return {"source_sha256": sha((root / module.path).read_bytes()), "tests_sha256": sha(tests),
            "equivalent_sha256": sha("\n".join(mine).encode())}


def session_result(source: Source, module: Module) -> dict | None:
    """A module's local session, as its committed summary would hold it (None without one).
    One whose module changed since is not counted: it is stale whatever it holds."""
    state = source.state / module.slug
    session, stamp, measured = state / "session.sqlite", state / "source.sha256", state / "measured.json"
    if not session.exists():
        return None
    extra = json.loads(measured.read_text()) if measured.is_file() else {}
    now = fingerprint(source.root, module)
    result = {"module": module.path,
              "source_sha256": stamp.read_text() if stamp.is_file() else "",
              "tests_sha256": extra.get("tests_sha256", ""),
              "equivalent_sha256": now["equivalent_sha256"],       # tally reads today's entries
              "commit": extra.get("commit", "unknown"),
              "date": str(datetime.date.fromtimestamp(session.stat().st_mtime))}
    if extra.get("test_secret"):
        result["test_secret"] = extra["test_secret"]
    if result["source_sha256"] == now["source_sha256"]:
        counts, survivors = tally(source, module)
        result["counts"] = {k: counts[k] for k in COUNTED}
        if counts["not made"]:
            result["not_made"] = counts["not made"]
        result["survivors"] = [{"id": key, "diff": diff, "not_run": not_run}
                               for key, diff, not_run in survivors]
    return result


def latest_result(source: Source, module: Module) -> tuple[dict | None, str, bool]:
    """(result, why it is stale or "", whether it is the local session's): the local session
    when it measured the module as it is, else the committed summary when that did. A result
    of another version of the module (or of other equivalent entries) is returned only as
    stale, never counted."""
    now = fingerprint(source.root, module)
    summary = source.root / RESULTS / f"{module.slug}.json"
    local = session_result(source, module)
    committed = json.loads(summary.read_text()) if summary.is_file() else None

    def stale(result: dict) -> str:
        if result["source_sha256"] != now["source_sha256"]:
            return "its source changed since"
        if result["equivalent_sha256"] != now["equivalent_sha256"]:
            return "its equivalent entries changed since"
        return ""
    found = [r for r in (local, committed) if r is not None]
    for result in found:
        if not stale(result):
            return result, "", result is local
    return (found[0], stale(found[0]), False) if found else (None, "", False)


def save_summary(source: Source, module: Module, result: dict) -> None:
    """The local session's result, committed beside the report (unchanged: left alone)."""
    path = source.root / RESULTS / f"{module.slug}.json"
    if path.is_file() and json.loads(path.read_text()) == result:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1) + "\n")


def _takes_secret(root: Path, module: Module) -> bool:
    """Whether one of the module's test files has a test or fixture taking the test secret."""
    files = {root / t.split("::")[0] for t in module.tests}
    return any(f.is_file() and TAKES_SECRET.search(f.read_text()) for f in files)


def write_report(source: Source, modules) -> str:
    """The report, from each module's latest result (latest_result); the local sessions'
    results are saved as the committed summaries too (the working tree's only)."""
    what = f"the working tree at {commit_label(source)}" if source.root == ROOT else source.label
    lines = ["# Mutation testing: the latest run",
             "",
             f"Written by `python bench/mutation.py` on {datetime.date.today()}, measuring "
             f"{what}: each module's local session, else its committed summary ({RESULTS}/), "
             f"as of the commit in `measured`. See docs/testing.md.",
             "",
             "| module | mutants | killed | survived | equivalent | score | measured |",
             "|---|---:|---:|---:|---:|---:|---|"]
    all_survivors = []
    total = Counter()
    with_session = set()
    for m in modules:
        result, stale, local = latest_result(source, m)
        if local:
            with_session.add(m.path)
            if source.root == ROOT:
                save_summary(source, m, result)
        if result is None:
            lines.append(f"| {m.path} | not run | | | | | |")
            continue
        measured = f"{result['commit']}, {result['date']}"
        if stale:
            lines.append(f"| {m.path} | stale: {stale} | | | | | {measured} |")
            continue
        counts = Counter(result["counts"])
        total.update(counts)
        all_survivors += [(s["id"], s["diff"], s["not_run"]) for s in result["survivors"]]
        if result.get("carried_from"):
            measured += f" (carried from {result['carried_from']})"
        if result["tests_sha256"] and result["tests_sha256"] != fingerprint(source.root, m)["tests_sha256"]:
            measured += "; tests changed since"
        if result.get("test_secret") != "fixed" and _takes_secret(source.root, m):
            measured += "; " + BEFORE_FIXED_SECRET
        n = counts["killed"] + counts["survived"] + counts["equivalent"]
        score = f"{counts['killed'] / (n - counts['equivalent']):.1%}" if n > counts["equivalent"] else "-"
        note = f" ({counts['pending']} pending)" if counts["pending"] else ""
        if result.get("not_made"):
            note += f" ({result['not_made']} not made)"
        lines.append(f"| {m.path}{'' if not m.only else ' (' + ', '.join(m.only) + ')'}{note} | {n} | "
                     f"{counts['killed']} | {counts['survived']} | {counts['equivalent']} | {score} | "
                     f"{measured} |")
    n = total["killed"] + total["survived"] + total["equivalent"]
    if n:
        lines.append(f"| **all** | {n} | {total['killed']} | {total['survived']} | "
                     f"{total['equivalent']} | {total['killed'] / max(1, n - total['equivalent']):.1%} | |")
    lines += ["", "Score: killed / (mutants - equivalent). Killed includes hangs (a mutant whose "
              "tests time out). A stale module's result measured another version of it and is "
              "not counted: run it again. \"Not made\": mutants cosmic-ray's operator failed to "
              "produce (listed in no column).", ""]
    if all_survivors:
        lines += ["## Survivors to kill or explain", ""]
        for key, diff, not_run in all_survivors:
            lines += [f"- `{key}`" + (f" ({NOT_RUN})" if not_run else ""), "",
                      "```diff", diff.strip(), "```", ""]
    else:
        lines += ["No unexplained survivor.", ""]
    # Only a session names every mutant of its module: entries of the others are not judged.
    stale = ({k for k in read_equivalent() if k.split(" | ")[0] in with_session}
             - {mutant.key() for m in modules if m.path in with_session
                for mutant in _all_mutants(source, m)})
    if stale:
        lines += ["## Equivalent entries that match no mutant (stale: check and remove)", ""]
        lines += [f"- `{k}`" for k in sorted(stale)] + [""]
    if source.root == ROOT and UNRUN.is_file():
        # The coverage figure and the lines no test runs belong beside the mutants they explain.
        lines += ["## Coverage (`python bench/mutation.py coverage`)", "", "```",
                  *UNRUN.read_text().splitlines(), "```", ""]
    source.report.write_text("\n".join(lines))
    return "\n".join(lines[:len(modules) + 9])


def _all_mutants(source: Source, module: Module):
    from cosmic_ray.work_db import WorkDB, use_db
    session = source.state / module.slug / "session.sqlite"
    if not session.exists():
        return []
    with use_db(str(session), WorkDB.Mode.open) as db:
        return list(identify(source.root, module, list(db.work_items)).values())


# ---------------------------------------------------------------------------- named mutants

def run_named(named: list[dict], wanted) -> int:
    """Plant each named mutant in a scratch copy; its tests must fail."""
    tree = STATE / "named-tree"
    scratch_copy(source_of(None), tree)
    failures = 0
    for entry in named:
        if wanted and entry["name"] not in wanted:
            continue
        path = tree / entry["path"]
        original = path.read_text()
        if original.count(entry["old"]) != 1:
            print(f"{entry['name']}: no longer applies to {entry['path']} (its text moved)")
            failures += 1
            continue
        path.write_text(original.replace(entry["old"], entry["new"]))
        try:
            outcome, output = run_tests_forked(tree, entry["tests"], 3600)
        finally:
            path.write_text(original)
        killed = outcome != "survived"
        failed = [l for l in output.splitlines() if l.startswith("FAILED")][:1]
        print(f"{'killed  ' if killed else 'SURVIVED'} {entry['name']}: {entry['why']}"
              + (f"\n         {failed[0]}" if failed else ""), flush=True)
        failures += not killed
    return 1 if failures else 0


# ---------------------------------------------------------------------------- coverage

COVERAGE_RC = """\
[run]
source = reference, grader
branch = false
parallel = true
patch = subprocess, _exit, fork
data_file = {data}

[report]
show_missing = true
skip_covered = true
"""


def run_coverage(pytest_args) -> int:
    state = STATE / "coverage"
    if state.exists():
        shutil.rmtree(state)
    state.mkdir(parents=True)
    rc = state / "coveragerc"
    rc.write_text(COVERAGE_RC.format(data=state / ".coverage"))
    env = {**os.environ, "COVERAGE_RCFILE": str(rc)}
    # One process, no xdist workers: the measure is not in a hurry, it leaves the other core
    # to whoever shares the machine, and it has fewer processes to follow.
    args = pytest_args or ["-q", "-p", "no:cacheprovider", "-n", "0"]
    test = subprocess.run(NICE + [sys.executable, "-m", "coverage", "run", "--rcfile", str(rc),
                                  "-m", "pytest", *args], cwd=ROOT, env=env)
    subprocess.run([sys.executable, "-m", "coverage", "combine", "--rcfile", str(rc), "-q"],
                   cwd=ROOT, env=env, check=True)
    report = subprocess.run([sys.executable, "-m", "coverage", "report", "--rcfile", str(rc)],
                            cwd=ROOT, env=env, capture_output=True, text=True, check=True).stdout
    total = next((l for l in report.splitlines() if l.startswith("TOTAL")), "TOTAL ?")
    header = [f"# Lines of reference/ and grader/ that no test runs (bench/mutation.py coverage, "
              f"{datetime.date.today()})",
              f"# pytest {' '.join(args)}: exit {test.returncode}; {' '.join(total.split())}",
              "# The sandbox child (grader/engine/sandbox/child.py) runs isolated, where coverage",
              "# cannot follow it: its lines are listed here although the sandbox tests run them.",
              "# So are grader/instructor/gradescope/run.py and upload.py: the Gradescope tests run",
              "# them from an unpacked autograder image, a copy of the course coverage does not map.",
              ""]
    UNRUN.write_text("\n".join(header) + report)
    print(report.splitlines()[-1] if report else "no coverage data")
    return test.returncode


# ---------------------------------------------------------------------------- the command line

def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="mutate modules and run their tests")
    run.add_argument("modules", nargs="*", help="paths from bench/mutation.toml (default: all)")
    run.add_argument("--fresh", action="store_true", help="start these modules' sessions over")
    run.add_argument("--survivors", action="store_true", help="run the survivors again")
    for p in (run, sub.add_parser("report", help="write the report from the sessions")):
        p.add_argument("--rev", help="measure this commit instead of the working tree")
        p.add_argument("--missing-tests-ok", action="store_true",
                       help="leave out listed test files that do not exist (an older commit)")
    named = sub.add_parser("named", help="plant the named mutants; each must be killed")
    named.add_argument("names", nargs="*")
    cov = sub.add_parser("coverage", help="run the suite under coverage.py")
    cov.add_argument("pytest_args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)

    if args.command in ("run", "named"):
        os.nice(19)                  # the machine is shared: mutants run when no one else wants it
        preload()
    source = source_of(getattr(args, "rev", None))
    tool, modules, named_mutants = load_config(source.root, getattr(args, "missing_tests_ok", False))
    if args.command == "run":
        by_path = {m.path: m for m in modules}
        chosen = [by_path[p] for p in args.modules if p in by_path] if args.modules else modules
        unknown = set(args.modules) - {m.path for m in modules}
        if unknown:
            parser.error(f"not in {CONFIG.name}: {', '.join(sorted(unknown))}")
        # A stopped run (Ctrl-C, or SIGTERM, e.g. a killed process group) still writes the
        # report and the summaries of what it measured.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        for m in chosen:
            try:
                run_module(source, m, modules, tool, fresh=args.fresh, survivors=args.survivors)
            finally:
                print(write_report(source, modules), flush=True)
        return 0
    if args.command == "report":
        print(write_report(source, modules))
        return 0
    if args.command == "named":
        return run_named(named_mutants, set(args.names))
    return run_coverage(args.pytest_args)


if __name__ == "__main__":
    sys.exit(main())

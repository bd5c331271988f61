"""bench/mutation.py's committed results: on a checkout without sessions (.mutation/ is not
committed) the report shows each module's committed summary, and a summary of another
version of the module is shown as stale, never counted (docs/testing.md, Mutation testing).
"""
from __future__ import annotations

import importlib.util
import json
import os
import sys

import pytest

from conftest import ROOT

_spec = importlib.util.spec_from_file_location("mutation", ROOT / "bench" / "mutation.py")
mutation = sys.modules["mutation"] = importlib.util.module_from_spec(_spec)   # dataclasses look it up
_spec.loader.exec_module(mutation)

MODULE = mutation.Module("pkg/mod.py", ("tests/test_mod.py",))
SURVIVOR = "pkg/mod.py | f | AddNot | return x"


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """A module, its test file, its equivalent entries and its committed summary, as
    measured: the summary holds one survivor."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text("def f(x):\n    return x\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_mod.py").write_text("def test_f():\n    pass\n")
    equivalent = tmp_path / "equivalent.txt"
    equivalent.write_text("pkg/mod.py | f | NumberReplacer | return x | why\n")
    monkeypatch.setattr(mutation, "EQUIVALENT", equivalent)
    summary = {"module": MODULE.path, **mutation.fingerprint(tmp_path, MODULE),
               "commit": "abc1234", "date": "2026-12-01",
               "counts": {"killed": 5, "survived": 1, "equivalent": 1, "pending": 0},
               "survivors": [{"id": SURVIVOR, "diff": "-return x\n+return not x", "not_run": False}]}
    (tmp_path / mutation.RESULTS).mkdir(parents=True)
    (tmp_path / mutation.RESULTS / "pkg.mod.json").write_text(json.dumps(summary))
    (tmp_path / ".mutation").mkdir()                 # no session in it: the report goes there
    return mutation.Source(tmp_path, tmp_path / ".mutation", "commit abc1234"), summary


def _row(source) -> tuple[str, str]:
    mutation.write_report(source, [MODULE])
    text = source.report.read_text()
    (row,) = [line for line in text.splitlines() if line.startswith(f"| {MODULE.path}")]
    return row, text


def test_without_a_session_the_committed_summary_is_the_result(tree):
    source, summary = tree
    assert mutation.latest_result(source, MODULE) == (summary, "", False)
    row, text = _row(source)
    # 7 mutants: 5 killed, 1 survived, 1 equivalent; 5 of the 6 not equivalent killed.
    assert row == f"| {MODULE.path} | 7 | 5 | 1 | 1 | 83.3% | abc1234, 2026-12-01 |"
    assert f"- `{SURVIVOR}`" in text and "+return not x" in text


@pytest.mark.parametrize("change,why", [
    ("pkg/mod.py", "its source changed since"),
    ("equivalent.txt", "its equivalent entries changed since"),
])
def test_a_summary_of_another_version_is_stale_and_not_counted(tree, change, why):
    source, summary = tree
    path = source.root / change
    path.write_text(path.read_text().replace("return x", "return -x"))
    assert mutation.latest_result(source, MODULE) == (summary, why, False)
    row, text = _row(source)
    assert row == f"| {MODULE.path} | stale: {why} | | | | | abc1234, 2026-12-01 |"
    assert SURVIVOR not in text and "| **all**" not in text


def test_changed_tests_leave_the_counts_but_say_so(tree):
    source, _ = tree
    (source.root / "tests" / "test_mod.py").write_text("def test_f():\n    assert True\n")
    row, _ = _row(source)
    assert row.endswith("| 83.3% | abc1234, 2026-12-01; tests changed since |")


def test_a_local_session_of_the_module_as_it_is_comes_first(tree, monkeypatch):
    source, summary = tree
    local = {**summary, "commit": "def5678", "counts": {**summary["counts"], "killed": 6}}
    monkeypatch.setattr(mutation, "session_result", lambda source_, module: local)
    assert mutation.latest_result(source, MODULE) == (local, "", True)
    # A session of an older version of the module gives way to the committed summary.
    old = {**local, "source_sha256": "0" * 64}
    monkeypatch.setattr(mutation, "session_result", lambda source_, module: old)
    assert mutation.latest_result(source, MODULE) == (summary, "", False)
    # With neither current, the session is what is shown, as stale.
    (source.root / mutation.RESULTS / "pkg.mod.json").unlink()
    assert mutation.latest_result(source, MODULE) == (old, "its source changed since", False)


def test_a_module_being_measured_is_left_out_by_a_second_run(tree, capsys):
    """Two runs of one module would share its session and swap their mutants' outcomes: the
    second is refused while the first holds the module's lock, and touches nothing."""
    import fcntl
    source, _ = tree
    with open(source.state / f"{MODULE.slug}.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        mutation.run_module(source, MODULE, [MODULE], {}, fresh=True, survivors=False)
    assert capsys.readouterr().out == f"{MODULE.path}: another run is measuring it now: left out\n"
    assert not (source.state / MODULE.slug).exists()


def test_mutants_the_tool_could_not_make_are_named_in_the_row_and_counted_nowhere(tree):
    source, summary = tree
    (source.root / mutation.RESULTS / "pkg.mod.json").write_text(json.dumps({**summary, "not_made": 2}))
    row, _ = _row(source)
    assert row == f"| {MODULE.path} (2 not made) | 7 | 5 | 1 | 1 | 83.3% | abc1234, 2026-12-01 |"


def test_a_mutant_the_operator_fails_to_make_is_recorded_and_the_run_goes_on(tmp_path, monkeypatch):
    # cosmic-ray's exception replacer raises on `except (A, *more)`: the session must record
    # that mutant as not made and run the next one, not end the whole module's run. The
    # suite runs without cosmic-ray installed (it is a quality extra), so exec_session meets
    # stand-ins of the four cosmic-ray modules it imports.
    import contextlib
    import enum
    from types import ModuleType, SimpleNamespace
    calls = []

    def mutate_code(original, operator, occurrence):
        calls.append(occurrence)
        if occurrence == 0:
            raise AttributeError("'PythonNode' object has no attribute 'value'")
        return None

    class Db:
        def __init__(self):
            self.results = {}
            item = lambda job, occ: SimpleNamespace(job_id=job, mutations=[SimpleNamespace(
                module_path="m.py", operator_name="core/ExceptionReplacer", operator_args={},
                occurrence=occ, start_pos=(1, 0), end_pos=(1, 1))])
            self.pending_work_items = [item("a", 0), item("b", 1)]

        def set_result(self, job, result):
            self.results[job] = result

    db = Db()
    outcome = enum.Enum("WorkerOutcome", "NORMAL EXCEPTION ABNORMAL NO_TEST SKIPPED")
    fakes = {
        "cosmic_ray": ModuleType("cosmic_ray"),
        "cosmic_ray.plugins": SimpleNamespace(get_operator=lambda name: lambda **kw: object()),
        "cosmic_ray.mutating": SimpleNamespace(MutationVisitor=SimpleNamespace(mutate_code=mutate_code),
                                               _make_diff=lambda *a: []),
        "cosmic_ray.work_db": SimpleNamespace(WorkDB=SimpleNamespace(Mode=SimpleNamespace(open="open")),
                                              use_db=lambda *a, **k: contextlib.nullcontext(db)),
        "cosmic_ray.work_item": SimpleNamespace(TestOutcome=enum.Enum("TestOutcome", "SURVIVED KILLED"),
                                                WorkerOutcome=outcome, WorkResult=SimpleNamespace),
    }
    fakes["cosmic_ray"].plugins = fakes["cosmic_ray.plugins"]
    for name, module in fakes.items():
        monkeypatch.setitem(sys.modules, name, module)
    (tmp_path / "m.py").write_text("x = 1\n")
    mutation.exec_session(tmp_path / "s.sqlite", tmp_path, MODULE, 10, {}, {})
    assert calls == [0, 1]
    assert db.results["a"].output.startswith(mutation.NOT_MADE + ": AttributeError")
    assert db.results["a"].worker_outcome == outcome.EXCEPTION
    assert db.results["b"].worker_outcome == outcome.NO_TEST


def test_a_mutant_on_a_continuation_line_is_run_by_the_tests_of_its_statement():
    source = ("TABLE = {\n"            # 1
              "    'a': (1, 2),\n"     # 2: no line event of its own
              "    'b': (3, 4),\n"     # 3
              "}\n"                    # 4
              "def f(x):\n"            # 5
              "    if x:\n"            # 6
              "        return (x,\n"   # 7
              "                x)\n"   # 8
              "    return 0\n")        # 9
    starts = mutation.statement_starts(source)
    assert [starts[n] for n in (1, 2, 3, 4)] == [1, 1, 1, 1]
    assert [starts[n] for n in (5, 6, 7, 8, 9)] == [5, 6, 7, 7, 9]


def test_a_mutants_run_of_a_few_tests_is_a_hang_at_four_times_what_they_took():
    """A mutant first runs the tests of its line: a loop there is a hang at 4 times what
    those tests took unmutated (a minute at least), not at 4 times the whole list's time."""
    module = mutation.Module("m.py", ("tests/a.py", "tests/b.py"))
    took = {"tests/a.py::t1": 2.0, "tests/a.py::t2": 30.0, "tests/b.py::t3": 300.0}
    tool = {"timeout-factor": 4, "timeout-min-s": 60}
    assert mutation.run_timeout(["tests/a.py::t1"], module, took, tool, 900.0) == 60.0
    assert mutation.run_timeout(["tests/a.py::t1", "tests/a.py::t2"], module, took, tool, 900.0) == 128.0
    assert mutation.run_timeout(["tests/b.py::t3"], module, took, tool, 900.0) == 900.0   # never past the whole's
    assert mutation.run_timeout(list(module.tests), module, took, tool, 900.0) == 900.0
    assert mutation.run_timeout(["tests/a.py::unknown"], module, took, tool, 900.0) == 60.0


def test_every_run_of_the_tests_draws_the_same_random_secret(tmp_path, monkeypatch):
    """tests/conftest.py puts a secret drawn at random in test ids unless the environment
    names one: a forked run must collect the ids the unmutated run recorded, or pytest's
    'not found' reads as a kill."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "conftest.py").write_text(
        "import os, secrets\nimport pytest\n"
        "os.environ['GRADER_TEST_SECRET'] = os.environ.get('GRADER_TEST_SECRET') or secrets.token_hex(8)\n"
        "@pytest.fixture(params=[1], ids=['random-' + os.environ['GRADER_TEST_SECRET']])\n"
        "def secret(request):\n    return request.param\n")
    (tmp_path / "tests" / "test_mod.py").write_text("def test_f(secret):\n    pass\n")
    monkeypatch.delenv("GRADER_TEST_SECRET")            # as in the tool's own process
    node = f"tests/test_mod.py::test_f[random-{mutation.TEST_ENV['GRADER_TEST_SECRET']}]"
    for _ in range(2):
        outcome, output = mutation.run_tests_forked(tmp_path, [node], 120)
        assert outcome == "survived", output[-800:]


def test_a_result_from_before_the_fixed_test_secret_says_its_kills_may_be_false(tree):
    """Before the tool fixed the test secret, a test taking it had a random id in each run,
    and a mutant's run that did not find the ids the unmutated run recorded counted as a
    kill. A result measured then, of a module whose tests take the secret, says so."""
    source, summary = tree
    test = source.root / "tests" / "test_mod.py"
    test.write_text("def test_f(secret):\n    pass\n")
    fresh = {**summary, **mutation.fingerprint(source.root, MODULE)}
    (source.root / mutation.RESULTS / "pkg.mod.json").write_text(json.dumps(fresh))
    row, _ = _row(source)
    assert row.endswith(f"| abc1234, 2026-12-01; {mutation.BEFORE_FIXED_SECRET} |")
    (source.root / mutation.RESULTS / "pkg.mod.json").write_text(json.dumps({**fresh, "test_secret": "fixed"}))
    assert _row(source)[0].endswith("| abc1234, 2026-12-01 |")
    # Tests that take no secret never had such ids: nothing to say.
    test.write_text("def test_f(secret_file):\n    pass\n")
    (source.root / mutation.RESULTS / "pkg.mod.json").write_text(
        json.dumps({**summary, **mutation.fingerprint(source.root, MODULE)}))
    assert _row(source)[0].endswith("| abc1234, 2026-12-01 |")


def test_every_named_mutant_still_applies_to_its_module():
    """A named mutant is planted by replacing its `old` text, found exactly once: a module
    rewritten around it (batch.py's resume key grew the grading code) left the planted bug
    unplanted, and `named` failed on it instead of measuring the tests."""
    _, _, named = mutation.load_config()
    moved = [f"{e['name']}: {e['path']} holds its text {(ROOT / e['path']).read_text().count(e['old'])} times"
             for e in named if (ROOT / e["path"]).read_text().count(e["old"]) != 1]
    assert named and moved == []


def test_a_mutant_the_size_of_the_last_written_in_the_same_second_runs_as_written(tmp_path, monkeypatch):
    """Each mutant's tests import the module afresh in a forked child: no bytecode cached from
    the mutant before may stand in for it, whatever the environment says (a fork reads no
    PYTHONDONTWRITEBYTECODE). Two mutants of one size and one mtime: the second must fail."""
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    (tmp_path / "mutandum_pkg").mkdir()
    module = tmp_path / "mutandum_pkg" / "mutandum.py"
    (tmp_path / "mutandum_pkg" / "__init__.py").write_text("")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_mutandum.py").write_text(
        "from mutandum_pkg.mutandum import f\n\n\ndef test_f():\n    assert f(1) == 2\n")
    outcomes = []
    for body in ("def f(x):\n    return x + 1\n", "def f(x):\n    return x - 1\n"):
        module.write_text(body)
        os.utime(module, (1_700_000_000, 1_700_000_000))        # one second for both
        outcomes.append(mutation.run_tests_forked(tmp_path, ["tests/test_mutandum.py"], 300)[0])
    assert outcomes == ["survived", "killed"], outcomes
    assert not list(tmp_path.glob("mutandum_pkg/__pycache__/mutandum*.pyc"))

"""The oracle's two editions: in the course an answer, figure or public case is computed
(and recorded while a release records); in the learner edition it is read from what was
recorded, and what was not recorded, or must not be, is refused with a sentence, never
computed from a reference that is not there."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.engine import codec, memo, oracle
from grader.engine.cases import digest_of


@pytest.fixture
def edition(tmp_path, monkeypatch):
    """A learner edition's view: no reference solution, expectations read from tmp_path."""
    monkeypatch.setattr(oracle, "EXPECTATIONS", tmp_path)
    monkeypatch.setattr(oracle, "_tables", {})
    monkeypatch.setattr(oracle, "present", lambda module: not module.startswith("reference.solutions"))
    return tmp_path


def test_the_course_has_every_solution_and_no_other_module():
    assert oracle.has_solution("lesson1") and oracle.has_solution("lesson4")
    assert not oracle.has_solution("lesson9")
    assert not oracle.present("reference.no_such_module")
    assert not oracle.present("no_such_package.module")       # a missing parent is not an error
    assert oracle.reference_solution("lesson1").__name__ == "reference.solutions.lesson1"



COURSE_ROOT = Path(oracle.__file__).resolve().parents[2]
# How an editable install of the course answers an import: every module whose parent is one of
# its top-level packages, found in the course's folder, after the path's own finders missed it.
EDITABLE = f"""
import sys
from importlib.machinery import PathFinder
class Editable:
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        parent = name.rpartition(".")[0]
        if parent == "reference":
            return PathFinder.find_spec(name, [{str(COURSE_ROOT / "reference")!r}])
sys.meta_path.append(Editable)
"""


def _edition_copy(tmp_path: Path, solutions: bool) -> Path:
    skip = ("__pycache__",) + (() if solutions else ("solutions",))
    for part in ("grader", "reference"):
        shutil.copytree(COURSE_ROOT / part, tmp_path / part, ignore=shutil.ignore_patterns(*skip))
    return tmp_path


def _run(script: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-I", "-c", EDITABLE + script], capture_output=True, text=True,
                          timeout=120)


def test_an_edition_never_takes_the_solutions_of_a_course_installed_beside_it(tmp_path):
    """An instructor tries an edition in the environment the course is installed in: the
    import system would find reference.solutions in the course's folder, and the edition
    would grade and draw its experiments with the course's answers."""
    tree = _edition_copy(tmp_path, solutions=False)
    done = _run(f"""
sys.path.insert(0, {str(tree)!r})
import reference.solutions                       # the import system does find the course's
from grader.engine import oracle
assert oracle.__file__.startswith({str(tree)!r}), oracle.__file__
print([oracle.has_solution(f"lesson{{n}}") for n in (1, 4, 6)])
""")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[False,", "False,", "False]"]


def test_a_solution_whose_package_came_from_another_checkout_is_refused(tmp_path):
    """Here the file is in the edition's own tree, but ``reference`` was imported from the
    course's folder first, so the import would load the course's copy: refused, not used."""
    tree = _edition_copy(tmp_path, solutions=True)
    done = _run(f"""
sys.path.insert(0, {str(COURSE_ROOT)!r})
import reference
sys.path[0] = {str(tree)!r}
from grader.engine import oracle
assert oracle.has_solution("lesson1")
try:
    oracle.reference_solution("lesson1")
except oracle.OracleMissing as e:
    print("refused:", e)
""")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("refused: learner edition: reference.solutions.lesson1 was imported from "
                                  f"{COURSE_ROOT}"), done.stdout

def test_the_edition_reads_its_expectations_from_its_own_package():
    import grader
    assert oracle.EXPECTATIONS == Path(grader.__file__).resolve().parent / "expectations"


def test_an_absent_solution_is_refused_by_name(edition):
    with pytest.raises(oracle.OracleMissing, match="reference solution of lesson2 is not in this edition"):
        oracle.reference_solution("lesson2")
    with pytest.raises(oracle.OracleMissing) as raised:
        oracle.reference_decisions("lesson3")
    assert raised.value.where == "learner edition"


def test_a_computed_value_is_recorded_only_inside_recording():
    calls = []
    compute = lambda: calls.append(1) or 7
    assert oracle.recorded("ns", "outside", compute, available=True) == 7
    with oracle.recording() as tables:
        assert oracle.recorded("ns", "k", compute, available=True) == 7
        assert oracle.recorded("ns", "secret", compute, available=True, record=False) == 7
        assert oracle.recorded("other", "k2", lambda: [1, 2], available=True) == [1, 2]
    assert tables == {"ns": {"k": 7}, "other": {"k2": [1, 2]}}
    assert len(calls) == 3
    assert oracle._recording is None


def test_recording_blocks_nest_and_end_even_on_an_error():
    with oracle.recording() as outer:
        oracle.recorded("ns", "a", lambda: 1, available=True)
        with pytest.raises(RuntimeError):
            with oracle.recording() as inner:
                oracle.recorded("ns", "b", lambda: 2, available=True)
                raise RuntimeError
        oracle.recorded("ns", "c", lambda: 3, available=True)
    assert inner == {"ns": {"b": 2}}
    assert outer == {"ns": {"a": 1, "c": 3}}
    assert oracle._recording is None


def test_the_edition_reads_what_was_recorded_and_refuses_the_rest(edition):
    oracle.write_expectations(edition / "a" / "b", {"ns": {"k": (1, 2.5, "x")}})   # its parents made
    assert codec.loads((edition / "a" / "b" / "ns.json").read_text(encoding="utf-8")) == {"k": (1, 2.5, "x")}
    oracle.write_expectations(edition, {"ns": {"k": (1, 2.5, "x")}})
    oracle.write_expectations(edition, {"ns": {"k": (1, 2.5, "x")}})     # again, over its own folder
    never = lambda: pytest.fail("the edition computed a value instead of reading it")
    assert oracle.recorded("ns", "k", never, available=False) == (1, 2.5, "x")
    with pytest.raises(oracle.OracleMissing, match="ns: this edition holds no recorded value for other"):
        oracle.recorded("ns", "other", never, available=False)
    with pytest.raises(oracle.OracleMissing, match="no recorded value for k"):
        oracle.recorded("absent-namespace", "k", never, available=False)


def test_an_answer_is_keyed_by_function_arguments_and_keywords(edition):
    key = lambda *parts: digest_of(list(parts))
    oracle.write_expectations(edition, {"answers-lesson1": {
        key("pages_for", [17, 16], []): 2,
        key("pages_for", [16, 17], []): 1,
        key("pages_for", [17], [("page_tokens", 16)]): 3,
    }})
    answers = oracle.reference_oracle("lesson1")
    assert answers.pages_for(17, 16) == 2
    assert answers.pages_for(16, 17) == 1
    assert answers.pages_for(17, page_tokens=16) == 3
    with pytest.raises(oracle.OracleMissing):
        answers.pages_for(18, 16)
    with pytest.raises(oracle.OracleMissing):
        answers.kv_bytes(17, 16)            # another function under the same arguments


def test_the_course_oracle_calls_the_solution_and_records_its_answers():
    from reference.solutions import lesson1
    answers = oracle.reference_oracle("lesson1")
    with oracle.recording() as tables:
        got = answers.pages_for(17, 16)
    assert got == lesson1.pages_for(17, 16)
    assert tables == {"answers-lesson1": {digest_of(["pages_for", [17, 16], []]): got}}
    assert answers.pages_for is answers.pages_for        # kept after the first lookup
    with pytest.raises(AttributeError):
        answers._private                                  # no reach past the public functions
    with pytest.raises(AttributeError):
        answers.__wrapped__


def test_a_figure_is_computed_once_where_its_modules_are(monkeypatch):
    monkeypatch.setenv("GRADER_CACHE", "off")
    monkeypatch.setattr(memo, "_memory", {})
    calls = []
    compute = lambda: calls.append(1) or {"good": 3}
    with oracle.recording() as tables:
        for _ in range(2):
            assert oracle.figures("unit", "k", compute, needs=("reference.worker",), persist=False) == {"good": 3}
        oracle.figures("unit", "hidden", compute, needs=("reference.worker",), persist=False, record=False)
    assert len(calls) == 2                  # the second ask of "k" came from the memo
    assert tables == {"figures-unit": {"k": {"good": 3}}}


def test_a_figure_whose_modules_are_absent_is_read_back(edition):
    oracle.write_expectations(edition, {"figures-unit": {"k": 5}})
    never = lambda: pytest.fail("computed without the reference")
    assert oracle.figures("unit", "k", never, needs=("reference.solutions.lesson2",), persist=True) == 5
    with pytest.raises(oracle.OracleMissing):
        oracle.figures("unit", "other", never, needs=("reference.solutions.lesson2", "reference.worker"),
                       persist=True)
    # Every module it needs must be here: one present is not enough to compute.
    assert oracle.figures("unit", "k", never, needs=("reference.worker", "reference.solutions.lesson2"),
                          persist=True) == 5


def test_the_reference_as_a_policy_holds_each_lessons_decisions():
    from reference.solutions import lesson1, lesson2, lesson4
    decisions = oracle.reference_decisions("lesson4")
    assert decisions == {"on_event": lesson4.on_event, "prefix_key": lesson4.prefix_key,
                         "publishable": lesson4.publishable}
    core = oracle.reference_core()
    assert core.admit is lesson2.admit and core.prefix_key is lesson4.prefix_key
    designed = oracle.reference_policy()
    assert designed.check_contract is lesson1.check_contract and designed.prefix_key is lesson4.prefix_key
    plugged = oracle.lesson_policy({"prefix_key": lesson4.prefix_key})
    assert plugged.prefix_key is lesson4.prefix_key
    assert plugged.check_contract is not lesson1.check_contract      # the baselines' beside it
    assert oracle.lesson_policy({}).prefix_key is None                 # the worker's own keys

"""The on-disk memo of public cases and oracle runs: a warm check gives the same report as a
cold one, nothing stale or torn is ever read back, and hidden cases never reach the disk."""
import json
import pickle

import pytest

from conftest import ROOT, SECRET, run_grader
from grader.engine import memo
from grader.engine.layout import find_course
from grader.engine.pipeline import build_cases

REFERENCE = ROOT / "reference" / "solutions"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("GRADER_CACHE", str(folder))
    monkeypatch.setattr(memo, "_memory", {})       # this process remembers nothing yet
    return folder


def check_json(lesson):
    code, out, err = run_grader("check", lesson, "--submission", REFERENCE / f"{lesson}.py", "--json")
    assert code == 0, err
    report = json.loads(out)
    report.pop("duration_s")
    return report


@pytest.mark.parametrize("lesson", ["lesson2", "lesson5"])
def test_a_warm_check_gives_the_cold_report(lesson, cache, monkeypatch):
    monkeypatch.setenv("GRADER_CACHE", "off")
    cold = check_json(lesson)
    monkeypatch.setenv("GRADER_CACHE", str(cache))
    first = check_json(lesson)                 # computes and writes
    written = sorted(p.name for p in cache.iterdir())
    assert any(n.startswith("public-cases-") for n in written)
    warm = check_json(lesson)                  # reads back
    assert cold == first == warm
    assert sorted(p.name for p in cache.iterdir()) == written     # nothing new to write


def test_a_torn_or_foreign_file_is_computed_again(cache):
    calls = []
    compute = lambda: calls.append(1) or {"value": 42}
    assert memo.remember("unit", "k", compute) == {"value": 42}
    [path] = cache.iterdir()
    for junk in (b"", b"\x80\x05not a pickle", pickle.dumps({"value": 42})[:-3]):
        path.write_bytes(junk)
        memo._memory.clear()
        assert memo.remember("unit", "k", compute) == {"value": 42}
    assert len(calls) == 4
    assert pickle.loads(path.read_bytes()) == {"value": 42}     # overwritten whole


def test_other_code_never_reads_an_old_value(cache, monkeypatch):
    assert memo.remember("unit", "k", lambda: "old code") == "old code"
    memo._memory.clear()
    monkeypatch.setattr(memo, "code_digest", lambda: "an edited reference")
    assert memo.remember("unit", "k", lambda: "new code") == "new code"
    assert len(list(cache.iterdir())) == 2


def test_an_unwritable_folder_only_costs_the_speed_up(tmp_path, monkeypatch):
    blocker = tmp_path / "a file"
    blocker.write_text("")
    monkeypatch.setenv("GRADER_CACHE", str(blocker / "cache"))     # cannot be created
    monkeypatch.setattr(memo, "_memory", {})
    assert memo.remember("unit", "k", lambda: 7) == 7


def test_hidden_cases_never_reach_the_disk(cache):
    from grader.lessons import ledger_runs
    course = find_course(str(ROOT))
    cases = build_cases("lesson2", course, SECRET)
    hidden = [c for c in cases if c.family == "scenario" and c.visibility == "hidden"]
    public = [c for c in cases if c.family == "scenario" and c.visibility == "public"]
    assert hidden and public
    for case in hidden + public:
        ledger_runs.oracle_run(case)
    files = [p.name for p in cache.iterdir()]
    assert sum(n.startswith("lesson2-oracle-") for n in files) == len(public)
    # And the secret's digests appear nowhere in what was written.
    data = b"".join(p.read_bytes() for p in cache.iterdir())
    assert not any(c.digest.encode() in data for c in hidden)


def test_off_keeps_nothing_on_disk(tmp_path, monkeypatch):
    monkeypatch.setenv("GRADER_CACHE", "off")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(memo, "_memory", {})
    assert memo.remember("unit", "k", lambda: 1) == 1
    assert not any(tmp_path.iterdir())

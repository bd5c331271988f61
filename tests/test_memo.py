"""The on-disk memo of public cases and oracle runs: a warm check gives the same report as a
cold one, nothing stale or torn is ever read back, and hidden cases never reach the disk."""
import json
import os
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
    path = REFERENCE / (lesson if lesson == "lesson6" else f"{lesson}.py")
    code, out, err = run_grader("check", lesson, "--submission", path, "--json")
    assert code == 0, err
    report = json.loads(out)
    report.pop("duration_s")
    return report


@pytest.mark.parametrize("lesson", ["lesson2", "lesson3", "lesson4", "lesson5", "lesson6"])
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


class _Planted:
    """A pickle that would create a file when loaded: the memo must never load it."""
    def __init__(self, target):
        self.target = target

    def __reduce__(self):
        return (open, (self.target, "w"))


def test_a_torn_planted_or_foreign_file_is_computed_again(cache, tmp_path):
    calls = []
    compute = lambda: calls.append(1) or {"value": 42}
    assert memo.remember("unit", "k", compute) == {"value": 42}
    [path] = cache.iterdir()
    good = path.read_bytes()
    header, body = good.split(b"\n", 1)
    assert header.startswith(memo.MAGIC) and b"42" in body and b"pickle" not in good
    planted = tmp_path / "pwned"
    other_slot = good.replace(header.split()[2], b"0" * 64)
    for junk in (b"", good[:-3],                               # empty, torn
                 pickle.dumps(_Planted(str(planted))),         # a malicious pickle
                 header + b"\n" + body.replace(b"42", b"43"),  # edited: its digest no longer fits
                 other_slot,                                   # another slot's file
                 header + b"\n" + b'{"__type__": "os:system", "command": "true"}'):
        path.write_bytes(junk)
        memo._memory.clear()
        assert memo.remember("unit", "k", compute) == {"value": 42}
    assert len(calls) == 7 and not planted.exists()
    assert path.read_bytes() == good                          # overwritten whole


def test_a_fifo_in_the_cache_is_not_waited_on(cache):
    assert memo.remember("unit", "k", lambda: 1) == 1
    [path] = cache.iterdir()
    path.unlink()
    os.mkfifo(path)                    # opening it to read would wait for a writer forever
    memo._memory.clear()
    assert memo.remember("unit", "k", lambda: 2) == 2


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


def test_a_rubric_once_valid_is_read_back_and_a_changed_one_is_validated_again(cache, tmp_path, monkeypatch):
    import shutil
    import sys
    from grader.engine.errors import InputError
    from grader.engine.rubric import load_rubric
    folder = tmp_path / "rubrics"
    folder.mkdir()
    shutil.copy(ROOT / "rubrics" / "rubric.schema.json", folder)
    rubric = folder / "lesson1.yaml"
    rubric.write_text((ROOT / "rubrics" / "lesson1.yaml").read_text())
    first = load_rubric(rubric)
    real = sys.modules["jsonschema"]
    monkeypatch.setattr(memo, "_memory", {})      # another process: the verdict is on disk
    monkeypatch.setitem(sys.modules, "jsonschema", None)          # importing it would fail
    assert load_rubric(rubric) == first
    # Other data, or another schema, is validated again (here: the import is attempted).
    broken = rubric.read_text().replace("points: ", "points: -", 1)
    rubric.write_text(broken)
    with pytest.raises(ImportError):
        load_rubric(rubric)
    sys.modules["jsonschema"] = real
    with pytest.raises(InputError, match=r"lesson1\.yaml.*points"):
        load_rubric(rubric)
    rubric.write_text((ROOT / "rubrics" / "lesson1.yaml").read_text())
    schema = folder / "rubric.schema.json"
    schema.write_text(schema.read_text().replace('"minimum": 0', '"minimum": 1000', 1))
    sys.modules["jsonschema"] = None
    with pytest.raises(ImportError):
        load_rubric(rubric)


def test_a_warm_check_never_imports_jsonschema(cache):
    """Its format checkers cost about 0.15 s to import, more than the rest of a warm check's
    course files; only a file not validated before needs it."""
    import subprocess
    import sys
    code = ("import sys, runpy; sys.argv = ['grader', 'check', 'lesson1', '--submission', {!r}]\n"
            "try:\n    runpy.run_module('grader.cli', run_name='__main__')\n"
            "except SystemExit:\n    pass\n"
            "print('jsonschema' in sys.modules, file=sys.stderr)").format(str(REFERENCE / "lesson1.py"))
    env = {**os.environ, "GRADER_CACHE": str(cache)}
    seen = [subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                           text=True, timeout=120).stderr.strip().splitlines()[-1] for _ in range(2)]
    assert seen == ["True", "False"]


# ---- the folder, the code's digest and the file's rules, one by one -------------------------
def test_the_folder_is_the_setting_else_the_users_cache(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    for off in ("off", "OFF", "Off", "0", "false", "No"):
        monkeypatch.setenv("GRADER_CACHE", off)
        assert memo.cache_folder() is None
    for on in ("on", "ON", "1", "True", "yes"):             # a switch, not a folder named "on"
        monkeypatch.setenv("GRADER_CACHE", on)
        assert memo.cache_folder() == tmp_path / "xdg" / "serving-grader", on
    monkeypatch.setenv("GRADER_CACHE", "zz-cache")          # any other word is a folder's name
    assert memo.cache_folder() == memo.Path("zz-cache")
    monkeypatch.setenv("GRADER_CACHE", "")
    assert memo.cache_folder() == tmp_path / "xdg" / "serving-grader"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert memo.cache_folder() == home / ".cache" / "serving-grader"

    def no_home():
        raise RuntimeError("Could not determine home directory.")
    monkeypatch.setattr(memo.Path, "home", staticmethod(no_home))
    assert memo.cache_folder() is None                      # memory only, not a crash


@pytest.fixture
def fresh_digest():
    """The code digest computed anew, and forgotten after the test whatever it did."""
    memo.code_digest.cache_clear()
    yield
    memo.code_digest.cache_clear()


def test_the_code_digest_covers_every_course_source_and_nothing_else(tmp_path, monkeypatch, fresh_digest):
    assert (memo.PACKAGE_ROOT / "grader" / "engine" / "memo.py").is_file()
    for package in ("grader", "reference"):
        (tmp_path / package / "sub" / "__pycache__").mkdir(parents=True)
    monkeypatch.setattr(memo, "PACKAGE_ROOT", tmp_path)

    def digest():
        memo.code_digest.cache_clear()
        return memo.code_digest()
    seen = [digest()]
    for name in ("grader/a.py", "reference/sub/b.yaml", "reference/c.json"):
        (tmp_path / name).write_text("x")
        seen.append(digest())
        (tmp_path / name).write_text("y")                   # an edit, not only a new file
        seen.append(digest())
    assert len(set(seen)) == len(seen)
    for ignored in ("grader/notes.txt", "reference/sub/__pycache__/b.py", "docs.py"):
        (tmp_path / ignored).write_text("z")
        assert digest() == seen[-1], ignored


def test_the_files_digest_covers_every_file_of_every_folder(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b" / "deep"
    second.mkdir(parents=True)
    first.mkdir()
    seen = [memo.files_digest(first, second.parent)]
    for path in (first / "x.yaml", second / "y.csv"):
        path.write_text("1")
        seen.append(memo.files_digest(first, second.parent))
        path.write_text("2")
        seen.append(memo.files_digest(first, second.parent))
    assert len(set(seen)) == len(seen)


def test_an_array_is_read_back_as_it_was_written(cache):
    import numpy as np
    value = np.arange(6, dtype=np.int32).reshape(2, 3)
    assert memo.remember("unit", "array", lambda: value) is value
    memo._memory.clear()
    back = memo.remember("unit", "array", lambda: pytest.fail("computed again"))
    assert back.dtype == value.dtype and (back == value).all()


def test_a_large_value_is_read_back_not_computed_again(cache, monkeypatch):
    value = {"runs": list(range(40_000))}             # about 230 KB on disk
    memo.remember("unit", "large", lambda: value)
    [path] = cache.iterdir()
    memo._memory.clear()
    assert memo.remember("unit", "large", lambda: pytest.fail("computed again")) == value
    # The size limit: a file of exactly MAX_FILE bytes is read, one byte more is not.
    monkeypatch.setattr(memo, "MAX_FILE", path.stat().st_size)
    memo._memory.clear()
    assert memo.remember("unit", "large", lambda: pytest.fail("computed again")) == value
    monkeypatch.setattr(memo, "MAX_FILE", path.stat().st_size - 1)
    memo._memory.clear()
    assert memo.remember("unit", "large", lambda: "recomputed") == "recomputed"


def test_a_linked_memo_file_is_not_followed(cache, tmp_path):
    memo.remember("unit", "k", lambda: 1)
    [path] = cache.iterdir()
    elsewhere = tmp_path / "elsewhere.json"
    path.rename(elsewhere)                  # a valid file for this slot, planted as a link
    path.symlink_to(elsewhere)
    memo._memory.clear()
    assert memo.remember("unit", "k", lambda: 2) == 2
    assert not path.is_symlink()            # the link was replaced, not written through


def test_a_body_that_matches_its_digest_but_not_the_codec_is_computed_again(cache):
    import hashlib
    memo.remember("unit", "k", lambda: 1)
    [path] = cache.iterdir()
    slot = path.read_bytes().split(b"\n", 1)[0].split()[2]
    for body in (b"not json at all", b'{"__ndarray__": "complex1024", "data": []}'):
        path.write_bytes(b" ".join((memo.MAGIC, slot, hashlib.sha256(body).hexdigest().encode()))
                         + b"\n" + body)
        memo._memory.clear()
        assert memo.remember("unit", "k", lambda: 3) == 3


def test_the_folder_is_made_private_with_its_parents(tmp_path, monkeypatch):
    folder = tmp_path / "not" / "yet" / "there"
    monkeypatch.setenv("GRADER_CACHE", str(folder))
    monkeypatch.setattr(memo, "_memory", {})
    old = os.umask(0o022)
    try:
        memo.remember("unit", "k", lambda: 1)
    finally:
        os.umask(old)
    assert len(list(folder.iterdir())) == 1
    assert folder.stat().st_mode & 0o777 == 0o700


def test_a_failed_write_leaves_no_temporary_file(cache, monkeypatch):
    def refused(src, dst):
        raise PermissionError(13, "Permission denied")
    memo.remember("unit", "first", lambda: 1)                # the folder exists
    monkeypatch.setattr(memo.os, "replace", refused)
    assert memo.remember("unit", "k", lambda: 2) == 2         # the speed-up lost, nothing else
    assert [p.name.startswith("unit-") for p in cache.iterdir()] == [True]

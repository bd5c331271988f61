"""How a sandbox child starts: from child.py's bytecode when it is current, and, within
session.spare(), ahead of the Sandbox that takes it (grader check starts one before it
imports the lesson and reads its cases)."""
import json
import os
import py_compile
import shutil
import sys
import textwrap
import time

import pytest

from conftest import ROOT
from grader.engine.sandbox import Sandbox, isolation, session

SUBMISSION = textwrap.dedent('''
    import os
    def double(n):
        return 2 * n
    def seed():
        return os.environ.get("PYTHONHASHSEED")
''')


def _dead(child) -> bool:
    """The child's process has ended (given a moment to be reaped)."""
    for _ in range(100):
        if child.proc is None or child.proc.poll() is not None:
            return True
        time.sleep(0.05)
    return False


# ---- child.py's bytecode ----------------------------------------------------------------------
def _copy_of_child(tmp_path):
    source = tmp_path / "child.py"
    shutil.copy(session.CHILD, source)
    return source, tmp_path / "__pycache__" / f"child.sandbox.{sys.implementation.cache_tag}.pyc"


def test_the_child_runs_from_bytecode_written_beside_its_source(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    source, cached = _copy_of_child(tmp_path)
    assert session.child_program(source) == cached and cached.is_file()
    monkeypatch.setattr(session, "CHILD", source)
    for mode in ("process", "auto"):
        with Sandbox(SUBMISSION, "exercise.py", isolation=mode) as box:
            assert box.call("double", 21).value == 42
            assert box._plan.child_path.endswith(".pyc"), box._plan
            if box._plan.wrapped:                # bwrap binds the bytecode under a .pyc name
                wrapper = box._plan.wrapper
                assert box._plan.child_path == "/sandbox/child.pyc"
                assert wrapper[wrapper.index(str(cached)) + 1] == "/sandbox/child.pyc"


def test_stale_or_foreign_bytecode_is_never_run(tmp_path, monkeypatch):
    source, cached = _copy_of_child(tmp_path)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    assert session.child_program(source) == cached
    # The source changed after it was compiled (another size): compiled again, not run stale.
    source.write_text(source.read_text() + "\n# edited\n")
    os.utime(source, ns=(time.time_ns(), time.time_ns() + 10**9))
    assert not session._current(cached, source)
    assert session.child_program(source) == cached and session._current(cached, source)
    # Either of the two the import system checks tells: the time alone (the same bytes
    # touched), the size alone (an edit within the same second of the clock).
    stat = source.stat()
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns + 2 * 10**9))
    assert not session._current(cached, source)
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert session._current(cached, source)
    source.write_text(source.read_text() + "#")
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert not session._current(cached, source)
    assert session.child_program(source) == cached and session._current(cached, source)
    # Where bytecode may not be written, stale bytecode is passed over for the source.
    source.write_text(source.read_text() + "\n# again\n")
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    assert session.child_program(source) == source
    # Another interpreter's magic number, or a header that is no pyc's, is not current.
    py_compile.compile(str(source), cfile=str(cached), doraise=True,
                       invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP)
    assert session.child_program(source) == cached
    data = bytearray(cached.read_bytes())
    data[0] ^= 0xFF
    cached.write_bytes(bytes(data))
    assert session.child_program(source) == source
    cached.write_bytes(b"\0" * 8)
    assert session.child_program(source) == source
    # Only bytecode checked by time and size, as the sandbox writes it: a hash-based file
    # is passed over, and so is the module's own bytecode (an install's, naming its folder).
    py_compile.compile(str(source), cfile=str(cached), doraise=True,
                       invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)
    assert session.child_program(source) == source
    cached.unlink()
    py_compile.compile(str(source), doraise=True, invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP)
    assert session.child_program(source) == source and not cached.exists()


def test_bytecode_that_claims_more_than_its_source_is_not_current(tmp_path, monkeypatch):
    """Each header field must equal the source's, not merely reach it: a newer magic number
    (a later interpreter's), flags other than a timestamp file's, a recorded time later than
    the source's, a recorded size larger than the source's."""
    source, cached = _copy_of_child(tmp_path)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    assert session.child_program(source) == cached
    good = cached.read_bytes()
    for at, value in ((0, good[0] + 1), (4, 1)):       # the magic's first byte, the flags
        data = bytearray(good)
        data[at] = value
        cached.write_bytes(bytes(data))
        assert not session._current(cached, source), at
    cached.write_bytes(good)
    stat = source.stat()
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns - 2 * 10**9))    # recorded time later
    assert not session._current(cached, source)
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert session._current(cached, source)
    source.write_text(source.read_text()[:-1])          # recorded size larger, the same time
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert not session._current(cached, source)


def test_an_interpreter_without_a_bytecode_cache_runs_the_source(tmp_path, monkeypatch):
    source, cached = _copy_of_child(tmp_path)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    monkeypatch.setattr(sys.implementation, "cache_tag", None)
    assert session.child_program(source) == source and not cached.exists()


def test_a_source_that_does_not_compile_runs_as_the_source_and_says_nothing(tmp_path, monkeypatch, capfd):
    source, cached = _copy_of_child(tmp_path)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    source.write_text("def broken(:\n")
    assert session.child_program(source) == source and not cached.exists()
    assert capfd.readouterr() == ("", "")


FRAMES = textwrap.dedent('''
    import sys
    def callers():
        names, frame = [], sys._getframe(1)
        while frame is not None:
            names.append(frame.f_code.co_filename)
            frame = frame.f_back
        return names
''')


def test_the_childs_own_frames_name_no_folder_of_the_host(tmp_path, monkeypatch):
    """A submission can walk its caller's frames: the child's bytecode names its code where
    bubblewrap binds it, not where the grader is installed (an install's compiled child.py
    would name site-packages)."""
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    source, cached = _copy_of_child(tmp_path)
    monkeypatch.setattr(session, "CHILD", source)
    for mode in ("process", "auto"):
        with Sandbox(FRAMES, "exercise.py", isolation=mode) as box:
            assert box._plan.child_path.endswith(".pyc")
            names = box.call("callers").value
            assert set(names) == {"/sandbox/child.py"}, names
            assert not any(str(tmp_path) in n for n in names)


def test_no_bytecode_to_be_had_runs_the_source(tmp_path, monkeypatch):
    source, cached = _copy_of_child(tmp_path)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    assert session.child_program(source) == source and not cached.exists()
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    cached.parent.mkdir()
    cached.parent.chmod(0o500)                   # a read-only install
    try:
        if os.access(cached.parent, os.W_OK):    # root writes anyway: a file in the way instead
            cached.parent.chmod(0o700)
            shutil.rmtree(cached.parent)
            cached.parent.write_text("not a folder")
        assert session.child_program(source) == source
    finally:
        if cached.parent.is_dir():
            cached.parent.chmod(0o700)
    monkeypatch.setattr(session, "CHILD", source)
    with Sandbox(SUBMISSION, "exercise.py", isolation="process") as box:
        assert box._plan.child_path == str(source) and box.call("double", 2).value == 4


# ---- the spare child ----------------------------------------------------------------------------
def _spare_child():
    assert len(session._spares) == 1, session._spares
    return session._spares[0][1]


def test_a_sandbox_dropped_without_closing_ends_its_child():
    """Its finalizer kills what it holds: a grade that loses a Sandbox to an exception before
    it is closed leaves no process behind."""
    import gc
    box = Sandbox(SUBMISSION, "exercise.py", isolation="process")
    assert box.call("double", 2).value == 4
    child = box._child
    del box
    gc.collect()
    assert _dead(child)


def test_the_first_sandbox_of_its_plan_takes_the_spare_child():
    with session.spare():
        spare = _spare_child()
        with Sandbox(SUBMISSION, "exercise.py") as box:
            assert box.call("double", 4).value == 8
            assert box._child is spare and session._spares == []
            assert box.call("seed").value == str(session.FIRST_HASH_SEED)   # a first start's
            # Its plan is the one the probe answered: the report's isolation is a fresh child's.
            with Sandbox(SUBMISSION, "exercise.py") as fresh:
                assert fresh._child is not spare and fresh.isolation == box.isolation
        assert _dead(spare)
    assert session._spares == [] and session._probes == []


def test_a_spare_child_no_sandbox_takes_is_killed_when_the_block_ends():
    with session.spare():
        spare = _spare_child()
        workdir = spare.workdir
    assert _dead(spare) and session._spares == []
    assert workdir is None or not os.path.exists(workdir)
    with session.spare(isolation="process"):              # a host folder, removed with it
        spare = _spare_child()
        workdir = spare.workdir
        assert workdir is not None and os.path.isdir(workdir)
    assert _dead(spare) and not os.path.exists(workdir)


def test_a_sandbox_of_another_plan_or_a_later_start_never_takes_it():
    wrapped = isolation.bwrap_problem(session.PYTHON, str(session.child_program(session.CHILD))) is None
    other = "process" if wrapped else "auto"
    with session.spare(isolation=None if wrapped else "process"):
        spare = _spare_child()
        with Sandbox(SUBMISSION, "exercise.py", isolation=other) as box:
            assert box._child is not spare and box.call("double", 1).value == 2
        assert _spare_child() is spare
    assert _dead(spare)
    # A restart is a later start, with its own hash seed: the spare was started as a first.
    with Sandbox(SUBMISSION, "exercise.py") as box:
        assert box.call("seed").value == str(session.FIRST_HASH_SEED)
        with session.spare():
            spare = _spare_child()
            box.restart()
            assert box.call("seed").value == str(session.FIRST_HASH_SEED + 1)
            assert box._child is not spare and _spare_child() is spare
        assert _dead(spare)


def test_a_block_within_a_block_starts_no_second_child():
    with session.spare():
        spare = _spare_child()
        with session.spare():
            assert _spare_child() is spare
        assert _spare_child() is spare           # the inner block leaves the outer one's child
    assert _dead(spare)


def test_grader_check_takes_its_spare_and_leaves_none(monkeypatch, capsys):
    from grader.cli import main
    taken, seen = [], []
    take = session._take_spare

    def spy(plan):
        seen.append(_spare_child())
        child = take(plan)
        taken.append(child)
        return child
    monkeypatch.setattr(session, "_take_spare", spy)
    ref = ROOT / "reference" / "solutions" / "lesson1.py"
    assert main(["check", "lesson1", "--submission", str(ref), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["score"] == report["max_score"]
    assert taken == seen and len(taken) == 1 and _dead(taken[0])
    assert session._spares == []
    # Lesson 6 is a folder of data: no sandbox takes the spare, and it is gone all the same.
    assert main(["check", "lesson6", "--submission", str(ROOT / "reference" / "solutions" / "lesson6"),
                 "--json"]) == 0
    capsys.readouterr()
    assert len(taken) == 1 and session._spares == []


@pytest.mark.parametrize("mode", ["chroot"])
def test_an_unknown_mode_starts_no_spare_and_the_check_says_why(monkeypatch, capsys, mode):
    from grader.cli import main
    monkeypatch.setenv("GRADER_SANDBOX", mode)
    started = []
    monkeypatch.setattr(session, "_start_child", lambda *a: started.append(a))
    assert main(["check", "lesson1", "--submission", str(ROOT / "reference" / "solutions" / "lesson1.py")]) == 2
    assert "GRADER_SANDBOX: unknown sandbox mode 'chroot'" in capsys.readouterr().err
    assert started == []


def test_a_spare_that_cannot_start_leaves_the_sandbox_to_start_its_own(monkeypatch):
    real, starts = session._start_child, []

    def out_of_descriptors_once(plan, start):
        starts.append(start)
        if len(starts) == 1:
            raise OSError(24, "Too many open files")
        return real(plan, start)
    monkeypatch.setattr(session, "_start_child", out_of_descriptors_once)
    with session.spare():
        assert session._spares == []
        with Sandbox(SUBMISSION, "exercise.py") as box:
            assert box.call("double", 3).value == 6
    assert starts == [0, 0]

"""grader.engine.sandbox: learner code runs in a child process and only values come back.

Most tests use the default (bwrap where it works, as in CI); those marked with the `mode`
fixture run under both the full bwrap stack and the plain-process fallback."""
import shutil
import subprocess
import sys
import os
import pathlib
import sysconfig
import tempfile
import textwrap
import time

import pytest

from conftest import ROOT
from grader.engine.sandbox import CallResult, Sandbox, SandboxError, isolation, session, wire
from grader.engine.report import isolation_in_brief
from grader.engine.sandbox.child import (LL_READ_DIR, closed_to_others, installed_packages,
                                         readable_beneath)
from grader.engine.validate import coerce
from reference.shapes import (AdmissionRequest, ChunkContext, CostModel, LedgerView, PageInfo,
                              Slo, Verdict)

SUBMISSION = textwrap.dedent('''
    import os, sys
    from reference.shapes import Verdict, ChunkContext

    def check(n):
        print("checking", n)
        return Verdict(ok=n > 0, reason="" if n > 0 else "empty_prompt")

    def todo():
        raise NotImplementedError("lesson 1, step 2")

    NOT_A_FUNCTION = 3

    def echo(*args):
        return args

    def probe_context(ctx):
        return [type(ctx).__name__, isinstance(ctx, ChunkContext), type(ctx.decode_contexts).__name__,
                ctx.cost.step_time(ctx.decode_contexts)]

    def environment():
        return dict(os.environ)

    def import_it(name):
        __import__(name)
        return True

    def spin():
        while True:
            pass

    def hard_exit():
        os._exit(0)

    def soft_exit():
        sys.exit(0)

    def flood():
        for i in range(100_000):
            print(i)
        print("x" * 50_000_000)
        return "done"

    def nan():
        return float("nan")

    def infinity():
        return [1.0, float("-inf")]

    def huge_int():
        return 10 ** 50

    def enormous_int():
        return 10 ** 5000

    def big_string():
        return "x" * 9_000_000

    class Hostile:
        def __eq__(self, other):
            raise RuntimeError("eq")
        def __reduce__(self):
            return (os.system, ("echo pwned",))
        def __getattr__(self, name):
            raise RuntimeError("getattr " + name)

    def hostile():
        return Hostile()

    def hostile_in_dataclass():
        return Verdict(ok=Hostile(), reason="")

    class Sneaky(Verdict):
        def __getattribute__(self, name):
            raise RuntimeError("no")

    def sneaky():
        return Sneaky(True, "")

    def self_loop():
        x = []
        x.append(x)
        return x

    def memory_bomb():
        return len(bytearray(10 * 2 ** 30))

    def fork():
        return os.fork()

    def connect():
        import socket
        socket.create_connection(("127.0.0.1", 9), timeout=0.2)

    def write_outside():
        open("/tmp/sandbox-escape-test", "w").write("x")

    def forge_frame():
        os.write(int(sys.argv[2]), b"\\xff\\xff\\xff\\xff")
        while True:
            pass

    import collections, enum

    class Reason(str, enum.Enum):
        POOL = "over_pool"

    class Pages(enum.IntEnum):
        NONE = 0

    def enum_in_verdict():
        return Verdict(ok=False, reason=Reason.POOL)

    def int_enum():
        return Pages.NONE

    def generator():
        return (i for i in range(3))

    def set_in_tuple():
        return (1, {2, 3})

    def digest():
        import hashlib
        return hashlib.sha256(b"acme").digest()       # lesson 4's key: .digest() for .hexdigest()

    def bytes_in_verdict():
        return Verdict(False, bytearray(b"over_pool"))

    def named_tuple():
        return collections.namedtuple("Pair", "a b")(1, 2)

    def ordered():
        return [collections.OrderedDict(a=1)]

    def forged_verdict():
        return {"__type__": "Verdict", "ok": True, "reason": ""}

    def forged_inside():
        return ({"a": 1}, [{"__type__": "ChunkPlan", "tokens": 16, "verdict": "ok"}])

    def plain_dict():
        return {"type": "Verdict", "ok": True}
''')


@pytest.fixture(params=["bwrap", "process"])
def mode(request):
    """Both containments; "bwrap" fails (never skips) where bubblewrap is unusable."""
    return request.param


def descendants(pid):
    """Host pids of every process below `pid` (bwrap's init and the child under bwrap)."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    found, frontier = set(), {pid}
    while frontier:
        frontier = {p for p, pp in parents.items() if pp in frontier} - found
        found |= frontier
    return found


@pytest.fixture(scope="module")
def box():
    # 2 s a call: honest calls answer in milliseconds, even on a loaded machine ten times
    # slower; the hangs below cost their 2 s each.
    with Sandbox(SUBMISSION, "exercise.py", call_timeout_s=2, run_timeout_s=120) as b:
        assert b.load_error is None
        yield b


def test_good_submission_returns_values(box):
    r = box.call("check", 3)
    assert r == CallResult("ok", {"__type__": "Verdict", "ok": True, "reason": ""}, "", "checking 3\n")
    assert coerce(box.call("check", 0).value, Verdict) == Verdict(False, "empty_prompt")


def test_arguments_arrive_as_real_shapes(box):
    ctx = ChunkContext(0.05, CostModel(), (100, 200), 0, 512, 16, 16)
    r = box.call("probe_context", ctx)
    assert r.value == ["ChunkContext", True, "tuple", CostModel().step_time((100, 200))]
    assert box.call("echo", Slo(1, 2.5), (1, 2), None).value == \
        [{"__type__": "Slo", "ttft_s": 1, "gap_s": 2.5}, [1, 2], None]


def test_shapes_sent_as_field_values_in_order_arrive_whole(box):
    # The grader sends a shapes argument as its class and field values in order; the child
    # builds the same dataclass (echoed back by name, then rebuilt here).
    sent = (AdmissionRequest("req-7", "tenant-a", 300, 100, 16, 2, 1), LedgerView(256, 100, 20, 30, 4),
            (PageInfo(0, 16, 16, 16, False), PageInfo(1, 5, 16, 0, True)),
            ChunkContext(0.05, CostModel(), (100, 200), 0, 512, 16, 16))
    assert wire.wire_arg(sent[0]) == {"__type__": "AdmissionRequest",
                                         "__fields__": ["req-7", "tenant-a", 300, 100, 16, 2, 1]}
    got = box.call("echo", *sent).value
    assert coerce(got[0], AdmissionRequest) == sent[0] and coerce(got[1], LedgerView) == sent[1]
    assert coerce(got[2], tuple[PageInfo, ...]) == sent[2]
    assert coerce(got[3], ChunkContext) == sent[3]


def test_call_many_batches_in_order(box):
    results = box.call_many("check", [(i,) for i in range(450)])   # three request frames
    assert [r.value["ok"] for r in results] == [i > 0 for i in range(450)]
    assert results[7].stdout == "checking 7\n"


def test_raised_and_missing(box):
    r = box.call("todo")
    assert r.status == "raised"
    assert r.detail == "NotImplementedError: lesson 1, step 2 (exercise.py line 10)"
    assert box.call("nope").status == "missing"
    assert box.call("NOT_A_FUNCTION").status == "missing"


HOSTILE_RAISES = """
class Text(str):
    def __radd__(self, other):
        raise RuntimeError("no")

    def __add__(self, other):
        raise RuntimeError("no")


class Loud(Exception):
    def __str__(self):
        return Text("boom")



class Eq:
    def __eq__(self, other):
        raise RuntimeError("no")


def text_message():
    raise Loud()


def hostile_name():
    e = NameError("x")
    e.name = Eq()
    raise e
"""


def test_an_exception_that_resists_being_described_still_reads_as_raised():
    """Its message a str subclass whose + raises, or its name a value whose == raises: the
    call raised, and says so (before, describing it crashed the child: 'ended the process')."""
    with Sandbox(HOSTILE_RAISES, "exercise.py") as b:
        r = b.call("text_message")
        assert r.status == "raised" and r.detail == "Loud: boom (exercise.py line 22)", r
        r = b.call("hostile_name")
        assert r.status == "raised" and r.detail.startswith("NameError"), r


def test_only_reference_shapes_is_importable(box):
    assert box.call("import_it", "reference.shapes").value is True
    for name in ("reference.worker", "reference.solutions", "grader", "grader.engine.validate", "yaml"):
        r = box.call("import_it", name)
        assert r.status == "raised" and "ModuleNotFoundError" in r.detail, name


def test_parent_environment_is_not_visible(monkeypatch):
    monkeypatch.setenv("GRADER_SECRET", "hunter2")
    src = "import os\ndef env():\n    return dict(os.environ)\n"
    with Sandbox(src, "exercise.py") as b:
        env = b.call("env").value
    assert "GRADER_SECRET" not in env and "hunter2" not in str(env)
    # bwrap sets PWD=/tmp; the str hash seed is the grader's fixed one (session.child_env)
    assert set(env) <= {"PATH", "LANG", "LC_CTYPE", "PWD", "PYTHONHASHSEED"}
    assert env["PYTHONHASHSEED"] == session.child_env(0)["PYTHONHASHSEED"]


def test_non_finite_and_oversized_values_are_bad(box):
    for fname in ("nan", "infinity", "huge_int", "enormous_int", "big_string"):
        r = box.call(fname)
        assert r.status == "bad", (fname, r)
    assert "non-finite" in box.call("nan").detail
    assert "too large" in box.call("big_string").detail
    assert box.call("check", 1).ok


def test_hostile_objects_are_bad_not_grader_errors(box):
    for fname in ("hostile", "hostile_in_dataclass", "sneaky", "self_loop"):
        r = box.call(fname)
        assert r.status == "bad", (fname, r)
    assert box.call("hostile").detail == "returned an object of type Hostile"
    assert box.call("check", 1).ok


def test_an_unsendable_answer_names_its_place_and_the_fix(box):
    """A learner's Enum member, generator, set or namedtuple is refused (exact kinds only),
    and the line says which field held it and what to return instead: "returned an object
    of type Reason" named neither, and cost contract verdicts whose ok was right."""
    said = {f: box.call(f) for f in ("enum_in_verdict", "int_enum", "generator", "set_in_tuple",
                                     "named_tuple", "ordered", "hostile", "digest", "bytes_in_verdict")}
    assert all(r.status == "bad" for r in said.values()), said
    assert said["enum_in_verdict"].detail == ("returned Verdict.reason as a Reason, a subclass of str: "
                                              "return a plain str (for an Enum member, its .value)")
    assert said["int_enum"].detail == ("returned a Pages, a subclass of int: return a plain int "
                                       "(for an Enum member, its .value)")
    assert said["generator"].detail == ("returned a generator: a yield in the function makes it return "
                                        "one; return the value itself, or tuple(...) of it where a tuple "
                                        "is asked for")
    assert said["set_in_tuple"].detail == "returned value[1] as a set: return a tuple, tuple(...) of it"
    assert said["named_tuple"].detail == ("returned a Pair, a subclass of tuple: "
                                          "return a plain tuple, tuple(...) of it")
    assert said["ordered"].detail == ("returned value[0] as an OrderedDict, a subclass of dict: "
                                      "return a plain dict, dict(...) of it")
    assert said["hostile"].detail == "returned an object of type Hostile"
    # Bytes are iterable, but a tuple of their ints is never the answer: text is.
    assert said["digest"].detail == ("returned a bytes: return a str, not bytes (of a digest, its "
                                     ".hexdigest(); of bytes b, b.hex() or b.decode())")
    assert said["bytes_in_verdict"].detail.startswith("returned Verdict.reason as a bytearray: return a str")


def test_a_dict_spelling_a_shapes_class_is_not_that_class(box):
    """The wire tags a dataclass as a dict with a "__type__" key: a dict written that way
    was read as the class, so a choose_chunk returning {"__type__": "ChunkPlan", ...} kept
    12 of 12, where a tuple of the same values is refused ("expected ChunkPlan")."""
    for fname in ("forged_verdict", "forged_inside"):
        r = box.call(fname)
        assert r.status == "bad", (fname, r)
        assert "a dict with a '__type__' key: return the class itself" in r.detail, r.detail
    assert box.call("forged_inside").detail.startswith("returned value[1][0] as a dict")
    assert box.call("plain_dict").value == {"type": "Verdict", "ok": True}     # a dict still is one


def test_print_flood_is_bounded():
    # A grader that stopped draining the child's output would leave it blocked on a full
    # pipe until the (generous, hang-guard) call timeout; the call must instead return.
    with Sandbox(SUBMISSION, "exercise.py", call_timeout_s=120, run_timeout_s=240) as b:
        r = b.call("flood")
    assert r.status == "ok" and r.value == "done"
    assert r.stdout.startswith("0\n1\n2\n") and len(r.stdout) == 1024


def test_memory_bomb_stays_in_the_child(box):
    r = box.call("memory_bomb")
    assert r.status == "crashed" or (r.status == "raised" and r.detail.startswith("MemoryError"))
    assert box.call("check", 1).ok


def test_hang_costs_only_that_call(box):
    t0 = time.monotonic()
    r = box.call("spin")
    # The call's own deadline ended it (its detail names it), not the run budget: no
    # clock can make it end sooner than its deadline, and a machine many times slower
    # still ends it long before the 60 s budget would.
    assert r.status == "timeout" and r.detail == "spin() did not return within 2 s"
    assert 2 <= time.monotonic() - t0 < 60
    assert box.call("check", 2).ok                     # a fresh child answers


def test_hang_in_a_batch_keeps_the_other_answers():
    with Sandbox(SUBMISSION, "exercise.py", call_timeout_s=2) as b:
        results = b.call_many("echo", [(1,), (2,)]) + b.call_many("spin", [()]) + b.call_many("echo", [(3,)])
        assert [r.status for r in results] == ["ok", "ok", "timeout", "ok"]
        src = "import time\ndef f(i):\n    if i == 3:\n        while True: pass\n    return i\n"
    with Sandbox(src, "exercise.py", call_timeout_s=2) as b:
        results = b.call_many("f", [(i,) for i in range(6)])
        assert [r.status for r in results] == ["ok", "ok", "ok", "timeout", "ok", "ok"]
        assert [r.value for r in results] == [0, 1, 2, None, 4, 5]


def test_exits_inside_a_call(box):
    r = box.call("hard_exit")
    assert r.status == "crashed" and "exited with code 0" in r.detail
    assert box.call("check", 1).ok
    r = box.call("soft_exit")
    assert r.status == "raised" and r.detail.startswith("SystemExit")
    assert box.call("check", 1).ok


def test_forged_protocol_frame_is_bad(box):
    r = box.call("forge_frame")
    assert r.status == "bad" and "frame" in r.detail
    assert box.call("check", 1).ok


def test_syntax_error_is_a_load_error_with_its_line():
    with Sandbox("def f():\n    return 1\n\ndef g(:\n    pass\n", "exercise.py") as b:
        # The file is named, as in every other load error: a learner checking several files
        # reads which one did not load.
        assert b.load_error == "SyntaxError: invalid syntax (exercise.py line 4)", b.load_error
        assert "/" not in b.load_error                 # no grader paths
        r = b.call("f")
        assert r.status == "unavailable" and "SyntaxError" in r.detail


def test_module_level_failures_are_load_errors():
    with Sandbox("import numpy\n", "exercise.py") as b:
        assert b.load_error == ("ModuleNotFoundError: No module named 'numpy' (exercise.py line 1): a "
                                "submission runs with the standard library and reference.shapes only")
    with Sandbox("from reference import sizing\n", "exercise.py") as b:     # the course's other modules
        assert b.load_error.startswith("ImportError: cannot import name 'sizing' from 'reference'")
        assert b.load_error.endswith(": a submission runs with the standard library and reference.shapes only")
    with Sandbox("import os\nos._exit(3)\n", "exercise.py") as b:
        assert "exited with code 3" in b.load_error
    with Sandbox("while True:\n    pass\n", "exercise.py", load_timeout_s=0.5) as b:
        assert "did not finish within 0.5 s" in b.load_error


def test_run_budget_exhaustion_gives_unavailable():
    # 4 s of budget: loading the file (charged to it) leaves most of it even on a machine ten
    # times slower, so the spin, not the load, is what spends it.
    with Sandbox(SUBMISSION, "exercise.py", call_timeout_s=30, run_timeout_s=4) as b:
        r = b.call("spin")
        # The run budget ended the call (its detail says so), not the call's own 30 s.
        assert r.status == "timeout" and "budget" in r.detail and "30 s" not in r.detail
        assert b._child is None                        # the hung child is gone
        assert [x.status for x in b.call_many("check", [(1,), (2,)])] == ["unavailable"] * 2
        assert b._child is None                        # and no new one was started for them


def test_close_leaves_no_process_or_directory(mode):
    b = Sandbox(SUBMISSION, "exercise.py", isolation=mode)
    assert b.call("check", 1).ok
    pid, workdir = b._child.proc.pid, b._child.workdir
    below = descendants(pid)
    assert (workdir is None) == (mode == "bwrap") and (mode == "process") == bool(workdir)
    assert len(below) == (2 if mode == "bwrap" else 0)  # bwrap's init and the child
    b.close()
    b.close()                                          # idempotent
    for p in {pid} | below:
        with pytest.raises(ProcessLookupError):
            os.kill(p, 0)                              # reaped: not even a zombie
    assert workdir is None or not os.path.exists(workdir)


def test_isolation_is_described(mode, monkeypatch):
    with Sandbox(SUBMISSION, "exercise.py", isolation=mode) as b:
        text = b.isolation
    assert "rlimits(as,cpu,fsize,nofile" in text and "seccomp(allow list of " in text
    assert "landlock(ABI " in text and "no_new_privs" in text
    assert "clean env" in text and "no site-packages" in text
    if mode == "bwrap":
        assert text.startswith("bwrap(no network, private pid/ipc/uts namespaces, read-only "
                               "binds of the interpreter and its libraries only, tmpfs /tmp 16 MiB")
        assert "uid 65534 with no capabilities" in text and "nproc" in text
    else:
        assert text.startswith("process (no bwrap: GRADER_SANDBOX=process): ")
    # The terminal's brief form: each layer by name, and why bubblewrap was not used.
    brief = isolation_in_brief(text)
    layers = "landlock, rlimits, seccomp, clean env, empty cwd, no site-packages"
    if mode == "bwrap":
        assert brief == f"bwrap: no_new_privs, uid 65534 with no capabilities, {layers}"
    else:
        assert brief.startswith("process (no bwrap: GRADER_SANDBOX=process): ")
        assert brief.endswith(f"no_new_privs, {layers}")
    monkeypatch.setenv("GRADER_SANDBOX", mode)          # the variable selects the same
    with Sandbox(SUBMISSION, "exercise.py") as b:
        assert b.isolation == text


def test_auto_prefers_bwrap_and_a_bad_mode_is_an_input_error(monkeypatch):
    problem = isolation.bwrap_problem(session.PYTHON, str(session.CHILD))
    with Sandbox(SUBMISSION, "exercise.py", isolation="auto") as b:
        assert b.isolation.startswith("bwrap(" if problem is None else f"process (no bwrap: {problem})")
    monkeypatch.setenv("GRADER_SANDBOX", "chroot")
    with pytest.raises(Exception, match="GRADER_SANDBOX: unknown sandbox mode 'chroot'"):
        Sandbox(SUBMISSION, "exercise.py")


def test_required_bwrap_that_cannot_run_is_a_grader_error(monkeypatch):
    monkeypatch.setattr(isolation.shutil, "which", lambda name, *a, **k: None)
    isolation.bwrap_problem.cache_clear()
    try:
        with pytest.raises(SandboxError, match="bwrap not installed"):
            Sandbox(SUBMISSION, "exercise.py", isolation="bwrap")
        with Sandbox(SUBMISSION, "exercise.py", isolation="auto") as b:   # falls back, and says so
            assert b.isolation.startswith("process (no bwrap: bwrap not installed): ")
            assert b.call("check", 1).ok
    finally:
        isolation.bwrap_problem.cache_clear()


ROOT_SPY = textwrap.dedent('''
    import os
    def who():
        return [os.getuid(), os.getgid(), os.getgroups(), os.getcwd()]
    def read(path):
        with open(path, "rb") as f:
            return f.read(200).decode("latin-1")
    def write(path):
        with open(path, "w") as f:
            f.write("escaped")
        return True
    def listing(path):
        return sorted(os.listdir(path))
    def exists(path):
        return os.path.lexists(path)      # stat: Landlock confines opening, not looking
''')


ROOT_TOP = session.CHILD.resolve().parts[1]      # e.g. "work": where the course lives


def test_bwrap_child_is_nobody_in_an_empty_read_only_world(monkeypatch, tmp_path):
    monkeypatch.setenv("GRADER_SECRET", "hunter2")
    secret = tmp_path / "course.secret"
    secret.write_text("hunter2")
    os.chmod(tmp_path, 0o755)
    with Sandbox(ROOT_SPY, "exercise.py", isolation="bwrap") as b:
        assert b.call("who").value == [65534, 65534, [], "/tmp"]
        # Listing / is Landlock's to refuse; what exists there is bwrap's choice.
        for name in ("sandbox", "tmp", "dev", "usr"):
            assert b.call("exists", "/" + name).value is True, name
        # A course under /tmp shares its top folder name with the sandbox's own tmpfs; the
        # reads below prove that the course itself is not there.
        for name in {"proc", "etc", "home", "var", "run", "sys"} | ({ROOT_TOP} - {"tmp"}):
            assert b.call("exists", "/" + name).value is False, name
        for path in (str(secret), f"/proc/{os.getpid()}/environ", "/proc/1/environ",
                     str(session.CHILD.parent.parent.parent / "reference" / "solutions" / "lesson1.py"),
                     "/etc/passwd"):
            r = b.call("read", path)
            assert r.status == "raised" and "FileNotFoundError" in r.detail, (path, r)
        stdlib = sysconfig.get_path("stdlib")
        # site-packages is masked (empty) where it lies under the bound prefix, and simply
        # absent where it does not (a virtual environment's).
        site = b.call("listing", sysconfig.get_path("purelib"))
        assert site.value == [] or (site.status == "raised" and "FileNotFoundError" in site.detail) \
            or not b.call("exists", os.path.join(sysconfig.get_path("purelib"), "pytest")).value
        assert b.call("read", os.path.join(stdlib, "os.py")).ok          # what Python needs is there
        for path in (os.path.join(stdlib, "evil.py"), "/usr/lib/evil", "/sandbox/child.py"):
            r = b.call("write", path)
            assert r.status == "raised", (path, r)
            assert "Read-only" in r.detail or "Permission" in r.detail, (path, r)
        assert b.call("write", "/tmp/scratch").ok                        # its own tmpfs
        assert not os.path.exists("/tmp/scratch")


def test_the_fallback_is_confined_a_uid_of_its_own_and_landlock(tmp_path):
    """As root the fallback child becomes uid 65534 with no capabilities (keeping file
    access as uid 0 only where 65534 cannot read the interpreter); whoever it is, Landlock
    lets it read nothing of the grader's and write nowhere but its own folder."""
    secret = tmp_path / "course.secret"
    secret.write_text("hunter2")
    os.chmod(tmp_path, 0o755)
    os.chmod(secret, 0o644)                    # readable by anyone: only Landlock stops it
    with Sandbox(ROOT_SPY, "exercise.py", isolation="process") as b:
        uid = b.call("who").value[0]
        text = b.isolation
        assert b.confined and b.lacks == ""
        for path in (str(secret), "/etc/shadow", "/etc/passwd", f"/proc/{os.getpid()}/environ",
                     str(session.CHILD.parents[3] / "reference" / "solutions" / "lesson1.py")):
            r = b.call("read", path)
            assert r.status == "raised" and "PermissionError" in r.detail, (path, r)
        assert b.call("read", os.path.join(sysconfig.get_path("stdlib"), "os.py")).ok
        for path in (str(tmp_path / "escaped"), os.path.join(sysconfig.get_path("stdlib"), "evil.py"),
                     "/tmp/sandbox-escape-test"):
            r = b.call("write", path)
            # As root every mount but its tmpfs is read-only to it first (read_only_tree);
            # Landlock refuses behind that (tests/adversarial/test_as_user.py: not root).
            assert r.status == "raised" and ("PermissionError" in r.detail
                                             or "Read-only file system" in r.detail), (path, r)
            assert not os.path.exists(path)
        assert b.call("write", "scratch").ok                  # its own working directory
    assert text.startswith("process (no bwrap: GRADER_SANDBOX=process): ")
    if os.geteuid() != 0:
        assert uid == os.geteuid() and f"uid {uid} with no capabilities" in text
    else:
        assert uid == 65534 and "uid 65534 with no capabilities" in text
        closed = any(closed_to_others(p) for p in (sysconfig.get_path("stdlib"),))
        assert ("file access as uid 0" in text) == closed       # said, not hidden


FILL_DISK = textwrap.dedent('''
    def fill(files):
        written = 0
        try:
            for i in range(files):
                with open("f%d" % i, "wb") as f:
                    f.write(b"x" * (1 << 20))
                written += 1
        except OSError as exc:
            return [written, type(exc).__name__]
        return [written, ""]
''')


def test_the_working_directory_holds_16_mib_in_both_modes(mode):
    """Files of 1 MiB (the file-size limit) one after another: the 16 MiB tmpfs working
    directory takes 16 and refuses the 17th, under bwrap and, as root (as these tests run:
    bwrap needs it), under the fallback, whose working directory was a host folder that
    took all 40."""
    with Sandbox(FILL_DISK, "exercise.py", isolation=mode, call_timeout_s=60) as b:
        written, error = b.call("fill", 40).value
        text = b.isolation
    assert written == 16 and error == "OSError", (written, error)
    if mode == "process":
        assert "tmpfs working directory 16 MiB" in text



# The fallback's hardening in a process of its own, where the tmpfs cannot be made: as
# a container's root without the right to mount (private_tmpfs fails as it reports there),
# and as a user other than root. Then it tries to write in its working directory.
UNCAPPED = textwrap.dedent('''
    import os, sys, tempfile
    from grader.engine.sandbox import child
    if os.geteuid() == 0:
        child.private_tmpfs = lambda libc, workdir, size: "working directory not size-capped (unshare failed)"
    else:                                  # a kernel with unprivileged user namespaces off
        child.own_user_namespace = lambda libc: False
    work = sys.argv[1]
    applied, lacks = child.harden(work, {"tmp": 16 << 20, "fsize": 1 << 20})
    try:
        with open("f0", "wb") as f:
            f.write(b"x")
        wrote = "wrote"
    except OSError as exc:
        wrote = type(exc).__name__
    print(wrote)
    print("; ".join(applied))
''')


@pytest.mark.parametrize("user", ["container root", "not root"])
def test_a_working_directory_nothing_can_cap_is_read_only(user):
    """The fallback's working directory is a 16 MiB tmpfs only where the child may mount
    one; elsewhere it was a host folder that took file after file (1 MiB each, the
    file-size limit) until the time budget ended. There Landlock now grants it reads
    only, and the report says so."""
    work = tempfile.mkdtemp(prefix="grader-uncapped-")       # pytest's own folder is root's alone
    try:
        prefix = []
        if user == "not root":             # its own folder, as the grader's user has one
            os.chown(work, 65534, 65534)
            prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        done = subprocess.run([*prefix, sys.executable, "-c", UNCAPPED, work], cwd=work, capture_output=True,
                              text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert done.returncode == 0, done.stderr
        wrote, applied = done.stdout.splitlines()
        assert wrote == "PermissionError" and not os.listdir(work), done.stdout
    finally:
        shutil.rmtree(work)
    assert "not size-capped" in applied and ": read-only" in applied and "writes nothing" in applied


# Not root, where the kernel allows a user namespace: a file of a folder it may read
# (the script adds it to sys.path, whose folders Landlock lets it read) is read after
# hardening, and the working directory written.
OWN_NAMESPACES = textwrap.dedent('''
    import os, sys
    from grader.engine.sandbox import child
    work, readable = sys.argv[1], sys.argv[2]
    sys.path.append(os.path.dirname(readable))
    applied, lacks = child.harden(work, {"tmp": 16 << 20, "fsize": 1 << 20})
    with open(readable, "rb") as f:
        f.read()
    with open("f0", "wb") as f:
        f.write(b"x")
    print(os.listdir("."))
    print("; ".join(applied))
    print(lacks)
''')


def test_not_root_the_fallback_reads_without_a_trace_and_writes_in_a_tmpfs():
    """A grader that is not root cannot make a mount namespace, but a user namespace of the
    child's own (its uid mapped to itself) can, where the kernel allows one: there the
    working directory is a 16 MiB tmpfs (it was a host folder, read-only so that nothing
    filled it) and every other mount read-only, so reading a file stamps no access time
    (relatime did, for any later child to see); the capabilities the namespace gave are
    gone before any learner code runs, so the child is still confined."""
    work = tempfile.mkdtemp(prefix="grader-own-ns-")   # pytest's own folders are root's alone
    folder = pathlib.Path(tempfile.mkdtemp(prefix="grader-own-ns-lib-"))
    readable = folder / "mark.py"
    readable.write_text("# a file any child may read\n")
    mtime = readable.stat().st_mtime_ns
    os.utime(readable, ns=(mtime, mtime))          # as on a fresh install: a read would stamp it
    os.chmod(folder, 0o755)
    os.chmod(readable, 0o644)
    try:
        os.chown(work, 65534, 65534)
        done = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                               sys.executable, "-c", OWN_NAMESPACES, work, str(readable)],
                              cwd=work, capture_output=True, text=True, timeout=60,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert done.returncode == 0, done.stderr
        inside, applied, lacks = done.stdout.splitlines()
        assert inside == "['f0']" and os.listdir(work) == [], done.stdout   # not the host folder
        assert readable.stat().st_atime_ns == mtime
    finally:
        shutil.rmtree(work)
        shutil.rmtree(folder)
    assert "user namespace of its own" in applied
    assert "tmpfs working directory 16 MiB, every other mount read-only" in applied
    assert "uid 65534 with no capabilities" in applied and lacks == "", done.stdout


MACHINE_WIDE = textwrap.dedent('''
    import ctypes

    def free_memory():
        libc = ctypes.CDLL(None, use_errno=True)
        return [libc.sysinfo(ctypes.create_string_buffer(256)), ctypes.get_errno()]
''')


def test_a_child_cannot_read_the_machines_free_memory(mode):
    """The public-case child once read the machine's free memory (sysinfo) after a call to
    the hidden-case child, which held 700 MB or nothing by a hidden input's bit: a channel
    into the feedback handed back early. The call fails with EPERM (1)."""
    with Sandbox(MACHINE_WIDE, "exercise.py", isolation=mode) as b:
        assert b.call("free_memory").value == [-1, 1]


RECORD_LOCKS = textwrap.dedent('''
    import fcntl, os, struct

    def lock(offsets):
        fd = os.open(os.__file__, os.O_RDONLY)
        for at in offsets:
            fcntl.fcntl(fd, fcntl.F_SETLK, struct.pack("hhqqi", fcntl.F_RDLCK, 0, at, 1, 0))
        return fd

    def locked(count):
        fd = os.open(os.__file__, os.O_RDONLY)
        probe = [fcntl.fcntl(fd, fcntl.F_GETLK, struct.pack("hhqqi", fcntl.F_WRLCK, 0, at, 1, 0))
                 for at in range(count)]
        return [struct.unpack("hhqqi", got)[0] != fcntl.F_UNLCK for got in probe]
''')


OWN_FLAGS = textwrap.dedent('''
    import fcntl, os

    def own_flags():
        r = os.open("own", os.O_RDWR | os.O_CREAT)              # its working directory
        w = os.open("own", os.O_RDWR)
        copy = fcntl.fcntl(r, fcntl.F_DUPFD, 10)                 # 0
        cloexec = os.dup(w)                                       # F_DUPFD_CLOEXEC, 1030
        fcntl.fcntl(r, fcntl.F_SETFD, fcntl.FD_CLOEXEC)           # 2
        fd_flags = fcntl.fcntl(r, fcntl.F_GETFD)                  # 1
        fcntl.fcntl(w, fcntl.F_SETFL, fcntl.fcntl(w, fcntl.F_GETFL) | os.O_NONBLOCK)   # 3, 4
        return [copy >= 10, cloexec != w, bool(fd_flags & fcntl.FD_CLOEXEC), os.get_blocking(w)]
''')


def test_a_child_keeps_the_fcntl_commands_on_its_own_descriptors(mode):
    """fcntl is an allow list: duplicating a descriptor and reading or setting its flags
    still work (the interpreter and the standard library use them)."""
    with Sandbox(OWN_FLAGS, "exercise.py", isolation=mode) as b:
        r = b.call("own_flags")
    assert r.ok and r.value == [True, True, True, False], r


def test_children_cannot_leave_each_other_messages_in_record_locks(mode):
    """Every child may open the standard library: read locks one child held on bytes 0 and
    2 of os.py, another child saw as [True, False, True] (the locks are the file's, across
    mount namespaces). Both the lock and the look now fail with EPERM."""
    with Sandbox(RECORD_LOCKS, "a.py", isolation=mode) as a, \
            Sandbox(RECORD_LOCKS, "b.py", isolation=mode) as b:
        held, seen = a.call("lock", (0, 2)), b.call("locked", 3)
    assert held.status == seen.status == "raised", (held, seen)
    assert "PermissionError" in held.detail and "PermissionError" in seen.detail


SHARED_FUTEX = textwrap.dedent('''
    import ctypes, os
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    WORD = libc.mmap(None, 4096, 1, 1, os.open(os.__file__, os.O_RDONLY), 0)  # MAP_SHARED
    NR = 98 if os.uname().machine in ("aarch64", "arm64") else 202

    class Timespec(ctypes.Structure):
        _fields_ = [("s", ctypes.c_long), ("ns", ctypes.c_long)]

    def futex(op):
        """FUTEX_WAIT (0) for no time at all on the first word of os.py, or FUTEX_WAKE (1)."""
        value = ctypes.c_uint32.from_address(WORD).value
        got = libc.syscall(ctypes.c_long(NR), ctypes.c_void_p(WORD), ctypes.c_int(op),
                           ctypes.c_uint32(value if op & 127 == 0 else 1),
                           ctypes.byref(Timespec(0, 0)), None, ctypes.c_int(0))
        return [got, ctypes.get_errno()]
''')


def test_children_cannot_signal_each_other_through_a_shared_futex(mode):
    """Every child may map the standard library, and a shared futex's key is the file and
    offset: a child waiting on the first word of os.py was woken by another child, whose
    FUTEX_WAKE returned 1 (how many it woke), under bwrap too. The shared operations now fail
    with EPERM (1); the private ones (FUTEX_PRIVATE_FLAG, 128: a process's own locks) work,
    here a wait of no time, which times out (ETIMEDOUT, 110)."""
    with Sandbox(SHARED_FUTEX, "a.py", isolation=mode) as a, \
            Sandbox(SHARED_FUTEX, "b.py", isolation=mode) as b:
        waited, woke = a.call("futex", 0), b.call("futex", 1)
        private = [a.call("futex", 128), b.call("futex", 128 | 1)]
    assert waited.value == woke.value == [-1, 1], (waited, woke)
    assert private[0].value == [-1, 110] and private[1].value[0] == 0, private


READ_A_FILE = textwrap.dedent('''
    def read(path):
        with open(path, "rb") as f:
            return len(f.read(16))
''')


def test_a_child_leaves_no_access_time_on_what_it_reads(mode):
    """relatime stamps a file's access time at its first read after a change (and once a
    day): a child that read standard library files of its choice marked them for any later
    child to see with stat(), a hidden input's bits for the public-case child of the next
    grade. Under the fallback as root every mount the child sees is now read-only (bwrap's
    binds are), so a read leaves the time as it was. The file's access time is first set
    back to its modification time, as it is on a fresh install, so a read would stamp it."""
    target = pathlib.Path(os.__file__).with_name("antigravity.py")
    mtime = target.stat().st_mtime_ns
    os.utime(target, ns=(mtime, mtime))
    with Sandbox(READ_A_FILE, "exercise.py", isolation=mode) as b:
        assert b.call("read", str(target)).value == 16
    assert target.stat().st_atime_ns == mtime


def test_landlock_reads_a_library_folder_but_not_the_packages_inside_it(tmp_path):
    """The fallback's Landlock allows folders it may read, and only allows: a standard
    library folder holding site-packages is allowed entry by entry around it, its own
    listing alone where a packages folder lies below (the import system lists it)."""
    lib = tmp_path / "lib"
    for folder in ("python3.11/json", "python3.11/site-packages/reference",
                   "python3/dist-packages/yaml", "x86_64-linux-gnu"):
        (lib / folder).mkdir(parents=True)
    (lib / "python3.11" / "os.py").write_text("")
    (lib / "libc.so").write_text("")
    (lib / "python3.11" / "escape").symlink_to(lib / "python3.11" / "site-packages")
    # A link to a folder no root names: followed, its rule would allow what it leads to.
    (tmp_path / "elsewhere").mkdir()
    (lib / "python3.11" / "elsewhere").symlink_to(tmp_path / "elsewhere")
    stdlib = lib / "python3.11"
    hidden = installed_packages([str(stdlib), str(lib)])
    assert hidden == {str(stdlib / "site-packages"), str(lib / "python3" / "dist-packages")}
    everything = 0b111
    assert sorted(readable_beneath(str(lib), hidden, everything)) == sorted([
        (str(lib), LL_READ_DIR), (str(lib / "libc.so"), everything),
        (str(lib / "x86_64-linux-gnu"), everything),
        (str(lib / "python3"), LL_READ_DIR),
        (str(stdlib), LL_READ_DIR), (str(stdlib / "json"), everything),
        (str(stdlib / "os.py"), everything)])
    assert readable_beneath(str(stdlib / "site-packages"), hidden, everything) == []
    assert readable_beneath(str(stdlib / "json"), hidden, everything) == [(str(stdlib / "json"), everything)]
    # Emptied (as bwrap masks them, with an empty tmpfs), they hide nothing, and the folders
    # above them are allowed whole: one rule, not one per entry of the standard library.
    for packages in hidden:
        shutil.rmtree(packages)
        os.mkdir(packages)
    assert installed_packages([str(stdlib), str(lib)]) == set()
    assert readable_beneath(str(lib), set(), everything) == [(str(lib), everything)]


def test_a_packages_folder_reached_through_a_linked_root_is_still_hidden(tmp_path):
    """/lib is a link to /usr/lib on many systems, and both are library roots: a packages
    folder found under the link is known by its real path, which is the one the walk
    compares, or it would be allowed whole from the other root."""
    lib = tmp_path / "usr" / "lib"
    (lib / "python3" / "dist-packages" / "grader").mkdir(parents=True)
    (lib / "python3.11").mkdir()
    (tmp_path / "lib").symlink_to(lib)
    hidden = installed_packages([str(tmp_path / "lib")])
    assert hidden == {str(lib / "python3" / "dist-packages")}
    everything = 0b111
    walked = sorted([(str(lib), LL_READ_DIR), (str(lib / "python3"), LL_READ_DIR),
                     (str(lib / "python3.11"), everything)])
    assert sorted(readable_beneath(str(lib), hidden, everything)) == walked
    # Named by its link (sys.path may hold /lib), the root is walked as the folder it is: a
    # rule on the link would allow the whole folder it leads to, dist-packages included.
    assert sorted(readable_beneath(str(tmp_path / "lib"), hidden, everything)) == walked


def test_a_folder_lies_above_a_packages_folder_only_by_whole_names(tmp_path):
    """python3.1 is no folder on the way to python3.11/site-packages: it is allowed whole
    (walked, it would lose the entries that are links). A root's own site-packages is
    found as well as one a level down, and the file system's root is walked like any."""
    lib = tmp_path / "lib"
    (lib / "python3.11" / "site-packages" / "grader").mkdir(parents=True)
    (lib / "python3.1").mkdir()
    (lib / "python3.1" / "link").symlink_to(lib / "python3.11")
    stdlib = lib / "python3.11"
    assert installed_packages([str(stdlib)]) == {str(stdlib / "site-packages")}
    hidden = installed_packages([str(lib)])
    assert hidden == {str(stdlib / "site-packages")}
    everything = 0b111
    assert readable_beneath(str(lib / "python3.1"), hidden, everything) == [(str(lib / "python3.1"), everything)]
    from_root = readable_beneath("/", hidden, everything)
    assert from_root[0] == ("/", LL_READ_DIR) and ("/", everything) not in from_root
    assert (str(stdlib), LL_READ_DIR) in from_root


def test_the_first_folder_closed_to_others_is_the_one_named(tmp_path):
    """The import system lists each sys.path folder: one that others may enter but not
    list (rwx--x--x) is closed to uid 65534 as surely as one they may not enter."""
    outer, inner = tmp_path / "outer", tmp_path / "outer" / "inner"
    inner.mkdir(parents=True)
    os.chmod(outer, 0o700)
    os.chmod(inner, 0o711)
    assert closed_to_others(str(inner)) == str(inner)
    os.chmod(inner, 0o755)
    assert closed_to_others(str(inner)) == str(outer)


class _Mounts:
    """A libc that records unshare and mount and lets each succeed."""
    def __init__(self):
        self.calls = []

        def syscall(nr, dirfd, path, flags, attr, size):    # mount_setattr
            got = attr._obj                  # what ctypes.byref points at
            self.calls.append(("syscall", nr.value, dirfd.value, path, flags.value,
                               (got.attr_set, got.attr_clr, got.propagation, got.userns_fd),
                               size.value))
            return 0
        self.syscall = syscall               # a function: read_only_tree sets its restype

    def unshare(self, flags):
        self.calls.append(("unshare", flags))
        return 0

    def mount(self, source, target, fstype, flags, data):
        self.calls.append(("mount", source, target, fstype, flags, data))
        return 0


def test_the_fallbacks_tmpfs_is_private_capped_and_not_executable(tmp_path):
    """In a mount namespace of its own (CLONE_NEWNS, 0x20000), made private (MS_REC 0x4000 |
    MS_PRIVATE 0x40000) before anything is mounted, or the tmpfs would show in the host's
    namespace wherever / is shared; then a tmpfs of the size asked on the working directory,
    no setuid (2), no devices (4), no exec (8); and the child works inside it."""
    from grader.engine.sandbox.child import private_tmpfs
    libc, before = _Mounts(), os.getcwd()
    try:
        said = private_tmpfs(libc, str(tmp_path), 16 << 20)
        assert os.getcwd() == str(tmp_path)
    finally:
        os.chdir(before)
    assert said == "tmpfs working directory 16 MiB, every other mount read-only"
    assert libc.calls == [("unshare", 0x20000),
                          ("mount", b"none", b"/", None, 0x4000 | 0x40000, None),
                          # mount_setattr(AT_FDCWD, "/", AT_RECURSIVE, {MOUNT_ATTR_RDONLY}, 32)
                          ("syscall", 442, -100, b"/", 0x8000, (1, 0, 0, 0), 32),
                          ("mount", b"tmpfs", str(tmp_path).encode(), b"tmpfs", 2 | 4 | 8,
                           b"size=16777216,mode=0700")]


def test_cpu_limit_kills_a_runaway_the_wall_clock_would_allow():
    # The CPU limit (1 s of CPU) must act before the wall clock: 60 s of it leave room for
    # a child that gets a small share of a loaded machine.
    with Sandbox(SUBMISSION, "exercise.py", call_timeout_s=60, cpu_seconds=1) as b:
        r = b.call("spin")
        assert r.status == "crashed" and "SIGXCPU" in r.detail
        assert b.call("check", 1).ok


def test_a_child_that_cannot_start_is_a_grader_error(monkeypatch):
    monkeypatch.setattr(session, "PYTHON", "/bin/false")
    with pytest.raises(SandboxError):       # the load is awaited at the first use
        with Sandbox(SUBMISSION, "exercise.py") as b:
            b.load_error


def test_seccomp_blocks_fork_network_and_outside_writes(mode):
    with Sandbox(SUBMISSION, "exercise.py", isolation=mode) as b:
        assert "seccomp(allow list" in b.isolation
        for fname in ("fork", "connect"):
            r = b.call(fname)
            assert r.status == "raised" and "PermissionError" in r.detail, (fname, r)
        r = b.call("write_outside")
    if mode == "bwrap":           # the write lands in the sandbox's own tmpfs
        assert r.ok
    else:                         # a read-only mount as root, Landlock: nowhere but its own folder
        assert r.status == "raised" and ("PermissionError" in r.detail
                                         or "Read-only file system" in r.detail), r
    assert not os.path.exists("/tmp/sandbox-escape-test")


def test_the_allow_list_numbers_are_the_kernels():
    """child.py carries its own syscall numbers (it cannot rely on libseccomp being there);
    libseccomp, which is here, knows both architectures' tables."""
    import ctypes
    from grader.engine.sandbox import child
    lib = ctypes.CDLL("libseccomp.so.2")
    lib.seccomp_syscall_resolve_name_arch.argtypes = [ctypes.c_uint32, ctypes.c_char_p]
    tables = dict(child.ALLOWED_SYSCALLS, prlimit64=child.PRLIMIT64, ioctl=child.IOCTL,
                  fcntl=child.FCNTL, futex=child.FUTEX)
    for column, arch in enumerate(("x86_64", "aarch64")):
        token = child.AUDIT_ARCH[arch]
        for name, numbers in tables.items():
            known = lib.seccomp_syscall_resolve_name_arch(token, name.encode())
            assert numbers[column] == (known if known >= 0 else None), (arch, name)


def test_every_filter_jump_lands_inside_the_program():
    from grader.engine.sandbox import child
    for arch in child.AUDIT_ARCH:
        prog = child.seccomp_program(arch)
        assert len(prog) < 4096 and prog[-1] == (0x06, 0, 0, 0x00050001)    # default: EPERM
        for i, (code, jt, jf, _) in enumerate(prog):
            if code & 0x07 == 0x05:                                     # a jump
                assert i + 1 + max(jt, jf) < len(prog)


# The filter's verdicts, run without a kernel (both architectures, aarch64 included, which no
# machine here runs): a classic-BPF reader of the three instructions the filter uses, over
# the kernel's struct seccomp_data (nr, arch, instruction pointer, six 64-bit arguments),
# little-endian on both architectures.
ALLOW, EPERM, KILL = 0x7FFF0000, 0x00050001, 0x80000000


def _verdict(prog, arch_token, nr, *args):
    words = [nr & 0xFFFFFFFF, arch_token, 0, 0]
    for a in (*args, *[0] * (6 - len(args))):
        words += [a & 0xFFFFFFFF, a >> 32]
    pc, acc = 0, 0
    while True:
        code, jt, jf, k = prog[pc]
        if code == 0x20:                        # BPF_LD | BPF_W | BPF_ABS
            acc = words[k // 4]
        elif code in (0x15, 0x35, 0x45):        # BPF_JMP | BPF_JEQ / BPF_JGE / BPF_JSET, BPF_K
            taken = acc == k if code == 0x15 else acc >= k if code == 0x35 else bool(acc & k)
            pc += jt if taken else jf
        elif code == 0x06:                      # BPF_RET | BPF_K
            return k
        else:
            raise AssertionError(f"instruction {code:#x} at {pc}")
        pc += 1


# (x86_64, aarch64) numbers, from the kernels' tables, of calls a computing child never makes.
DENIED = {"socket": (41, 198), "clone": (56, 220), "execve": (59, 221), "kill": (62, 129),
          "ptrace": (101, 117), "mount": (165, 40), "sysinfo": (99, 179), "fchmodat": (268, 53)}


@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
def test_the_filter_allows_its_list_and_guarded_calls_with_their_arguments_only(arch):
    from grader.engine.sandbox import child
    col, token = (0 if arch == "x86_64" else 1), child.AUDIT_ARCH[arch]
    prog = child.seccomp_program(arch)
    other = child.AUDIT_ARCH["aarch64" if arch == "x86_64" else "x86_64"]
    assert _verdict(prog, other, 0) == KILL                 # another architecture's numbers
    for name, numbers in child.ALLOWED_SYSCALLS.items():
        if numbers[col] is not None:
            assert _verdict(prog, token, numbers[col], 5, 6) == ALLOW, name
    for name, numbers in DENIED.items():
        assert _verdict(prog, token, numbers[col]) == EPERM, name
    prlimit, ioctl, fcntl_nr = (302, 16, 72) if arch == "x86_64" else (261, 29, 25)
    assert _verdict(prog, token, prlimit, 0, 0) == ALLOW              # pid 0: itself
    for pid in (1, 4242, 1 << 32):                                    # another process's, or
        assert _verdict(prog, token, prlimit, pid, 0) == EPERM, pid   # a pid past 32 bits
    assert _verdict(prog, token, ioctl, 1, 0x5401) == ALLOW          # TCGETS
    for request in (0x5412, 0x5402, 0):                               # TIOCSTI, TCSETS, 0
        assert _verdict(prog, token, ioctl, 1, request) == EPERM, request
    # F_DUPFD, F_GETFD, F_SETFD, F_GETFL, F_SETFL, F_DUPFD_CLOEXEC: a descriptor's own.
    for command in (0, 1, 2, 3, 4, 1030):
        assert _verdict(prog, token, fcntl_nr, 3, command) == ALLOW, command
    # F_GETLK, F_SETLK, F_SETLKW, F_SETOWN, F_GETOWN, F_SETSIG, F_SETOWN_EX, F_OFD_GETLK, F_CANCELLK.
    for command in (5, 6, 7, 8, 9, 10, 15, 36, 1029):
        assert _verdict(prog, token, fcntl_nr, 3, command) == EPERM, command
    futex = 202 if arch == "x86_64" else 98
    for op in (128, 128 | 1, 128 | 9, 128 | 256):         # FUTEX_PRIVATE_FLAG: its own locks
        assert _verdict(prog, token, futex, 0, op) == ALLOW, op
    for op in (0, 1, 9, 256):                 # shared: a word of a file another child maps
        assert _verdict(prog, token, futex, 0, op) == EPERM, op
    if arch == "x86_64":                  # the x32 ABI's read: none of the allowed calls
        assert _verdict(prog, token, 0x40000000 | 0) == EPERM


def test_answers_larger_than_one_read_arrive_whole():
    # The grader reads the child's pipe into a 64 KiB buffer it reuses: an answer of many
    # reads, and frames that straddle two reads, must come out byte for byte.
    src = "def text(n, c):\n    return c * n\n"
    sizes = [1, 65_531, 65_536, 300_001, 7, 1 << 20]
    with Sandbox(src, "exercise.py") as b:
        got = b.call_each([("text", (n, chr(97 + i))) for i, n in enumerate(sizes)])
        assert [r.value for r in got] == [chr(97 + i) * n for i, n in enumerate(sizes)]
        assert b.call("text", 3, "z").value == "zzz"


@pytest.mark.parametrize("extra,printed", [
    ("", False),
    ("print('MARKER at load')\n", True),
    ("_pages_for = pages_for\n\ndef pages_for(tokens, page_tokens):\n"
     "    print('MARKER', tokens)\n    return _pages_for(tokens, page_tokens)\n", True),
], ids=["quiet", "at-load", "in-a-call"])
def test_a_submission_that_prints_is_told_so_and_never_what(tmp_path, extra, printed):
    # A learner debugging with print() saw nothing and no reason why: the report now says
    # that what a submission prints is not shown, and still shows none of it.
    import json
    from conftest import SUBMISSIONS, grade
    from grader.engine.pipeline import PRINTED
    path = tmp_path / "mine.py"
    path.write_text((SUBMISSIONS / "lesson1" / "alt_correct.py").read_text() + "\n" + extra)
    report = grade("lesson1", path)
    assert (PRINTED in report.notes) is printed, report.notes
    assert "MARKER" not in json.dumps(report.to_dict())
    assert report.score == report.max_score



def test_printing_only_in_the_hidden_child_is_not_told():
    """Whether the hidden cases' child printed is a bit of what they hold (a submission may
    print only on inputs no public case has): only the public child's printing is told."""
    from conftest import SECRET, SUBMISSIONS
    from grader.engine.layout import find_course
    from grader.engine.pipeline import PRINTED, grade_submission
    from grader.engine.submission import load_submission
    submission = load_submission(SUBMISSIONS / "lesson1" / "alt_correct.py")
    opened = []

    def sandbox():          # the grade opens the public child first, then the hidden one
        box = Sandbox(submission.source, "exercise.py", require_confinement=True)
        box._called_printed = len(opened) == 1
        opened.append(box)
        return box
    report = grade_submission("lesson1", submission, find_course(str(ROOT)), mode="grade",
                              secret=SECRET, sandbox=sandbox)
    assert len(opened) == 2 and opened[1].printed and not opened[0].printed
    assert PRINTED not in report.notes and report.score == report.max_score


def test_a_function_whose_parameters_are_not_the_stubs_is_told_so():
    # 'pages_for raised TypeError: pages_for() takes 1 positional argument but 2 were given'
    # named no line (none of the learner's ran) and not what the grader expects.
    source = "def f(a):\n    return a\n\ndef g(a, b):\n    return a + 'x'\n"
    with Sandbox(source, "mine.py") as b:
        r = b.call("f", 1, 2)
        assert r.status == "raised" and r.detail == (
            "TypeError: f() takes 1 positional argument but 2 were given: the grader calls it "
            "with the arguments its stub declares"), r.detail
        r = b.call("g", 1, 2)                 # a TypeError of the learner's own line: no hint
        assert r.status == "raised" and "stub" not in r.detail and "(mine.py line 5)" in r.detail, r.detail


LATER = textwrap.dedent('''
    import datetime, os, threading, time

    def clocks():
        utc = datetime.timezone.utc
        return [time.time(), time.time_ns() / 1e9, time.monotonic(), time.perf_counter(),
                time.clock_gettime(time.CLOCK_REALTIME),
                time.clock_gettime_ns(time.CLOCK_MONOTONIC) / 1e9,
                datetime.datetime.now().timestamp(), datetime.datetime.now(utc).timestamp(),
                datetime.datetime.today().timestamp(), time.mktime(time.localtime()),
                time.mktime(time.strptime(time.ctime())),
                time.mktime(time.strptime(time.asctime())),
                time.mktime(time.strptime(time.strftime("%c"), "%c")),
                datetime.datetime(*time.gmtime()[:6], tzinfo=utc).timestamp()]

    def cpu_clock():
        return time.clock_gettime(time.CLOCK_PROCESS_CPUTIME_ID)

    def ids():
        return [os.getpid(), os.getppid(), threading.get_native_id()]

    def days():
        # date.today() as days since 1970, and a datetime still a date, still subtracts
        now = datetime.datetime.now()
        return [(datetime.date.today() - datetime.date(1970, 1, 1)).days,
                isinstance(now, datetime.date), (now - datetime.datetime(1970, 1, 1)).days]

    def explicit():
        return [time.gmtime(0).tm_year, time.localtime(86400 * 366).tm_year, time.ctime(0)[-4:],
                time.strftime("%Y", time.gmtime(0)),
                datetime.datetime.fromtimestamp(0, datetime.timezone.utc).year]
''')


def test_a_restarted_child_reads_later_clocks_and_other_process_ids(mode):
    """A restarted child stands for the worker started again later: its wall and monotonic
    clocks read ten years and more later and its process ids are others (under bwrap every
    child has the same ids in its own PID namespace, and starts seconds after the one
    before), so lesson 4 sees a key salted by either. The first child's clock is the real
    one, a CPU clock is never moved, and a time given explicitly is not."""
    later = 3753 * 86400 + 11849            # ten years, a quarter and 3 h 17 min 29 s
    with Sandbox(LATER, "exercise.py", isolation=mode) as b:
        runs = []
        for start in range(3):
            if start:
                b.restart()
            before, mono_before = time.time(), time.monotonic()
            got = {f: b.call(f) for f in ("clocks", "cpu_clock", "ids", "days", "explicit")}
            after, mono_after = time.time(), time.monotonic()
            assert all(r.ok for r in got.values()), got
            runs.append((before, after, {f: r.value for f, r in got.items()}))
            # The child's monotonic clock is this machine's, moved: read between ours.
            mono = got["clocks"].value[2] - start * later
            assert mono_before - 1 <= mono <= mono_after + 1, (start, mono, mono_before)
    for start, (before, after, got) in enumerate(runs):
        wall = got["clocks"][:2] + got["clocks"][4:5] + got["clocks"][6:]
        for i, t in enumerate(wall):
            # Read with whole seconds where a format keeps only those.
            assert before - 1 + start * later <= t <= after + 1 + start * later, (start, i, t)
        assert got["cpu_clock"] < later / 2, got    # the child's own CPU time, never moved
        assert got["days"][0] == got["days"][2] == int(got["clocks"][0] // 86400), got
        assert got["days"][1] is True
        assert got["explicit"] == [1970, 1971, "1970", "1970", 1970], got
    pids = [tuple(got["ids"]) for _, _, got in runs]
    assert len({p[0] for p in pids}) == len({p[1] for p in pids}) == 3, pids
    assert all(p[0] == p[2] for p in pids), pids    # the main thread's id is the process id


def test_a_submission_that_rebinds_builtins_is_told_so_and_the_child_keeps_answering():
    """Rebinding len, type or isinstance in Python's builtins broke the child's own encoder
    and frame writer: the learner read "sent a malformed frame (JSONDecodeError)" or "exited
    with code 1". The child puts the builtins back after the load and after every call and
    says which were rebound."""
    at_load = "import builtins\nbuiltins.len = lambda x: 0\ndel builtins.isinstance\ndef f():\n    return 1\n"
    with Sandbox(at_load, "exercise.py") as b:
        assert b.load_error == ("it rebound Python's builtins isinstance, len: a submission may not "
                                "change the builtins (the grader's own code in the sandbox uses them)")
    in_a_call = textwrap.dedent('''
        import builtins
        def rebind():
            builtins.type = lambda *a: int
            return "rebound"
        def rebind_and_raise():
            builtins.len = None
            raise ValueError("after rebinding")
        def fine():
            return [len("abc"), type("x").__name__]
        class Alike:
            def __eq__(self, other):
                return True
            __hash__ = object.__hash__
        def rebind_alike():
            builtins.min = Alike()
            return "rebound"
        import dataclasses
        @dataclasses.dataclass
        class Sly:
            x: int = 1
            def __getattribute__(self, name):
                builtins.getattr = None     # learner code the encoder runs, reading a field
                return object.__getattribute__(self, name)
        def read_slyly():
            return Sly()
        def rebind_then_unsendable():
            builtins.type = lambda *a: list  # the encoder's own type test, misled
            return object()
        def same_again():
            # The same objects put back in another order, and a name of its own: nothing rebound.
            keep = builtins.abs
            del builtins.abs
            builtins.abs = keep
            builtins.extra_name = 1
            return "kept"
    ''')
    with Sandbox(in_a_call, "exercise.py") as b:
        assert b.load_error is None
        assert b.call("same_again") == CallResult("ok", "kept", "", "")
        for fname, name in (("rebind", "type"), ("rebind_and_raise", "len"), ("rebind_alike", "min"),
                            ("read_slyly", "getattr"), ("rebind_then_unsendable", "type")):
            r = b.call(fname)
            assert r.status == "bad" and r.detail.startswith(f"it rebound Python's builtin {name}:"), r
            assert b.call("fine") == CallResult("ok", [3, "str"], "", "")

"""The adversarial suite: hostile lesson 1 submissions against the sandbox.

Each attack (a full submission file under attacks/) is graded in a class of two, the
attack and then an honest submission (the reference solution), by one grader process, as
`grader grade` grades a class. Every test asserts that
- the attack scores no more than the honest stub (0: the attacks implement nothing);
- no secret left the grader: the instructor secret, the hidden workload families, the
  reference solution, the gradebook and a canary environment variable appear in no report,
  in the gradebook and in the grader's own output; nothing was written outside the
  sandbox; no connection reached a listener on the host; no process is left behind;
- the grader finished: both students are graded, none is a grader failure;
- the honest submission graded next has exactly the report it gets on its own.

Every attack runs under bwrap and under the plain-process fallback (Landlock, a seccomp
allow list, a uid of its own): both must hold. Without bwrap or Landlock these tests
fail rather than skip. tests/adversarial/test_as_user.py runs them again with the grader
itself an unprivileged user.
"""
import contextlib
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from conftest import ROOT, SECRET
from grader.instructor.batch import run_batch
from grader.cli import main
from grader.engine.layout import find_course
from grader.instructor.gradebook import open_gradebook
from grader.engine.pipeline import grade_path
from grader.engine import memo
from grader.engine.sandbox import session

COURSE = find_course(str(ROOT))
ATTACKS = Path(__file__).resolve().parent / "attacks"
HONEST = ROOT / "reference" / "solutions" / "lesson1.py"
STUB = ROOT / "assignments" / "lesson1" / "exercise.py"
# Small budgets cut every attack short. The honest submissions keep the grader's default
# budgets, so their grade never depends on how fast a loaded machine runs them.
QUICK = replace(session.DEFAULT_LIMITS, call_timeout_s=0.3, run_timeout_s=1.0,
                load_timeout_s=2.0, memory_bytes=256 << 20)
ATTACK_FILE = "a-attack.py"
PLACEHOLDER = "TARGETS = {}  # the test writes the real paths here"
STABLE = ("score", "max_score", "criteria", "cases", "isolation", "rubric_version", "mode")

READS = ["read_secret_file", "read_hidden_workloads", "read_reference", "read_gradebook",
         "read_environment", "read_installed_packages"]
SAFE = ["loop_forever", "sleep_forever", "memory_bomb", "flood_output", "exit_sys",
        "exit_os", "fake_result", "monkeypatch_grader", "hostile_values", "mutate_args",
        "crash_interpreter", "network", "swelling_answers", "wire_tampering",
        "outlive_the_call", "deep_answer"]
ESCAPES = READS + ["write_outside", "fork_bomb", "threads_and_children", "kill_parent",
                   "run_the_reference", "raw_syscalls", "tamper_gradebook", "signal_by_pipe",
                   "leave_a_mark", "kernel_interfaces", "inherited_descriptors"]
ALL = ESCAPES + SAFE
# The feedback is the leak channel: these raise "LEAK <what they got>" from their module.
LEAKS = READS + ["network", "threads_and_children", "kill_parent", "raw_syscalls",
                 "tamper_gradebook", "write_outside", "run_the_reference", "signal_by_pipe",
                 "leave_a_mark", "kernel_interfaces", "inherited_descriptors"]


def test_every_attack_file_is_in_the_suite():
    assert sorted(p.stem for p in ATTACKS.glob("*.py")) == sorted(ALL)


@dataclass
class Outcome:
    summary: object
    attack: dict           # the attack's report
    honest: dict           # the next submission's report
    gradebook: bytes
    written: list          # files the attack managed to create outside its sandbox
    connections: list      # what reached the host's listeners
    leftovers: list        # sandbox processes still alive after the batch

    @property
    def feedback(self) -> str:
        return " | ".join(c["feedback"] for c in self.attack["criteria"])


class World:
    """What the attacks are after, and one grader to grade them."""

    def __init__(self, tmp: Path):
        self.token = secrets.token_hex(8)
        self.canary_env = f"canary-{self.token}"
        self.secret_file = tmp / "course.secret"
        self.secret_file.write_bytes(SECRET)
        families = sorted((ROOT / "grader" / "instructor" / "families").glob("*.yaml"))
        hidden = [ROOT / "grader" / "lessons" / "lesson1.py", *families]
        self.canaries = {
            "secret": SECRET.decode(),
            "environment": self.canary_env,
            "reference": "return -(-tokens // page_tokens)",
            "reference docstring": HONEST.read_text().splitlines()[0][3:40],
            "hidden cases": "derive_seed(secret, \"lesson1\", \"hidden\")",
            **{f"family {p.stem}": p.read_text().strip().splitlines()[0][:40] for p in families},
        }
        self.hidden = [str(p) for p in hidden]
        self.gradebook_canary = "SQLite format 3"     # in the gradebook itself, of course
        self.chmod_target = tmp / "host-file"
        self.chmod_target.write_text("a host file")
        os.chmod(self.chmod_target, 0o600)
        self.tcp = socket.socket()
        self.tcp.bind(("127.0.0.1", 0))
        self.tcp.listen(8)
        self.tcp.setblocking(False)
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.udp.setblocking(False)

    def close(self):
        self.tcp.close()
        self.udp.close()

    def targets(self, where: Path, gradebook: Path) -> dict:
        name = f"pwned-{self.token}"
        write = [ROOT / f"{name}.txt", ROOT / "grader" / "__pycache__" / f"{name}.pyc",
                 ROOT / "reference" / "solutions" / f"{name}.py", Path("/tmp") / name,
                 Path("/dev/shm") / name, Path.home() / name, where / name,
                 gradebook.parent / f"{name}.db"]
        return {"course_root": str(ROOT), "secret_file": str(self.secret_file),
                "reference": str(HONEST), "hidden": self.hidden, "gradebook": str(gradebook),
                "grader_pid": os.getpid(), "tcp_port": self.tcp.getsockname()[1],
                "udp_port": self.udp.getsockname()[1], "write": [str(p) for p in write],
                "chmod_target": str(self.chmod_target), "memo": str(memo.cache_folder())}

    def attack(self, name: str, tmp: Path, mode: str) -> Outcome:
        folder, gradebook = tmp / "class", tmp / "gradebook.db"
        folder.mkdir()
        targets = self.targets(tmp, gradebook)
        source = (ATTACKS / f"{name}.py").read_text()
        assert PLACEHOLDER in source or "TARGETS" not in source
        (folder / ATTACK_FILE).write_text(source.replace(PLACEHOLDER, f"TARGETS = {targets!r}"))
        (folder / "b-honest.py").write_text(HONEST.read_text())
        os.environ["GRADER_SANDBOX"] = mode
        memo_before = memo_files()
        limits_before = grader_state()
        try:
            with open_gradebook(str(gradebook)) as book:
                summary = run_batch("lesson1", folder, COURSE, SECRET, book, jobs=1, progress=False)
                reports = {r.student: r.report for r in book.results()}
        finally:
            del os.environ["GRADER_SANDBOX"]
        written = [p for p in targets["write"] if os.path.lexists(p)]
        for p in written:                       # leave no trace even when a test fails
            os.unlink(p)
        changed = [what for what, before, after in (
            ("memo", memo_before, memo_files()), ("grader", limits_before, grader_state()),
            ("chmod", 0o600, self.chmod_target.stat().st_mode & 0o7777),
            ("triggers", [], sqlite_triggers(gradebook))) if before != after]
        return Outcome(summary, reports.get("a-attack", {}), reports.get("b-honest", {}),
                       gradebook.read_bytes(), written + changed, self._connections(),
                       sandbox_processes())

    def _connections(self) -> list:
        got = []
        try:
            conn, addr = self.tcp.accept()
            conn.close()
            got.append(f"tcp from {addr}")
        except BlockingIOError:
            pass
        try:
            got.append(f"udp {self.udp.recv(100)!r}")
        except BlockingIOError:
            pass
        return got


def memo_files() -> dict:
    folder = memo.cache_folder()
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())} if folder.is_dir() else {}


def grader_state() -> tuple:
    """What a submission must not change in the grader: its limits and its priority."""
    import resource
    return (resource.getrlimit(resource.RLIMIT_CPU), resource.getrlimit(resource.RLIMIT_AS),
            os.getpriority(os.PRIO_PROCESS, 0))


def sqlite_triggers(path: Path) -> list:
    import sqlite3
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        return db.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall()


def sandbox_processes() -> list:
    """Sandbox processes (bwrap, or a child.py) below this test process."""
    parents, names = {}, {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
                parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
                names[int(entry)] = Path(f"/proc/{entry}/cmdline").read_bytes()
            except (OSError, IndexError, ValueError):
                pass
    below, frontier = set(), {os.getpid()}
    while frontier:
        frontier = {p for p, pp in parents.items() if pp in frontier} - below
        below |= frontier
    return [names[p] for p in below if b"bwrap" in names[p] or b"child.py" in names[p]]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        w = World(tmp_path_factory.mktemp("world"))
        mp.setenv("GRADER_CANARY_TOKEN", w.canary_env)
        mp.setattr(session, "DEFAULT_LIMITS", QUICK)
        honest_limits, start = session.Limits(), session.Sandbox.__init__

        def limits_by_file(self, source, filename, **kw):
            session.DEFAULT_LIMITS = QUICK if filename == ATTACK_FILE else honest_limits
            start(self, source, filename, **kw)
        mp.setattr(session.Sandbox, "__init__", limits_by_file)
        w.stub, w.honest = {}, {}
        for mode in ("bwrap", "process"):
            mp.setenv("GRADER_SANDBOX", mode)
            w.stub[mode] = grade_path("lesson1", STUB, COURSE, mode="grade", secret=SECRET).to_dict()
            w.honest[mode] = json.loads(json.dumps(   # as the gradebook gives it back
                grade_path("lesson1", HONEST, COURSE, mode="grade", secret=SECRET).to_dict()))
            assert w.honest[mode]["score"] == w.honest[mode]["max_score"] > 0
            assert w.stub[mode]["score"] == 0
        mp.delenv("GRADER_SANDBOX")
        yield w
        w.close()


def assert_contained(world: World, out: Outcome, mode: str, capfd) -> None:
    # The grader finished, and graded both.
    assert out.summary.students == 2 and out.summary.graded == 2, out.summary
    assert not out.summary.failed, out.summary.failed
    # No better than the stub.
    assert out.attack["score"] <= world.stub[mode]["score"], out.feedback
    assert out.attack["isolation"].startswith("bwrap(" if mode == "bwrap" else "process (no bwrap")
    # The next submission was graded normally.
    assert {k: out.honest[k] for k in STABLE} == {k: world.honest[mode][k] for k in STABLE}
    # No secret left the grader.
    printed = capfd.readouterr()
    reports = json.dumps([out.attack, out.honest]) + printed.out + printed.err
    for what, canary in world.canaries.items():
        assert canary not in reports + out.gradebook.decode("latin-1"), what
    assert world.gradebook_canary not in reports
    assert out.written == [] and out.connections == [] and out.leftovers == []
    assert not os.path.exists("/tmp/pwned-by-reduce")       # nothing was ever unpickled


# What the feedback says about an attack: the learner is told what their code did.
SAYS = {"loop_forever": "did not return in time", "sleep_forever": "did not finish within 2 s",
        "memory_bomb": "MemoryError", "exit_sys": "raised SystemExit",
        "exit_os": "ended the process running a-attack.py: the process exited with code 0",
        "crash_interpreter": "SIGSEGV", "hostile_values": "returned something unusable",
        "flood_output": "returned str 'flooded', expected int", "mutate_args": "returned str 'mutated'",
        "monkeypatch_grader": "returned str 'patched-encode'", "fake_result": "returned str 'forged'",
        "swelling_answers": "draws on 4 MiB shared by all its calls",
        "wire_tampering": "returned str 'tampered'",
        "outlive_the_call": "returned str 'outlived'",
        "deep_answer": "returned a value nested more than 31 levels deep",
        "fork_bomb": "bomb failed: fork: PermissionError, shell: PermissionError, "
                     "spawn: PermissionError"}


def assert_said(out: Outcome, name: str) -> None:
    assert SAYS.get(name, "") in out.feedback, out.feedback
    if name in LEAKS and name != "write_outside":
        # The leak channel (its own load error, in the feedback) worked; nothing was in it.
        assert "LEAK" in out.feedback and '"ok:' not in out.feedback, out.feedback
    if name == "write_outside":         # under /tmp it wrote into its own tmpfs, nowhere else
        assert "LEAK" in out.feedback
        if not str(ROOT).startswith("/tmp/"):
            # A course under /tmp is, inside the sandbox, a path in the child's own tmpfs:
            # there assert_contained (nothing written on the host) is the whole proof.
            assert not re.search(f'"{ROOT}[^"]*", "ok:', out.feedback)


@pytest.mark.parametrize("name", ALL)
def test_attack_under_bwrap(world, name, tmp_path, capfd):
    out = world.attack(name, tmp_path, "bwrap")
    assert_contained(world, out, "bwrap", capfd)
    assert_said(out, name)


@pytest.mark.parametrize("name", ALL)
def test_attack_under_the_fallback(world, name, tmp_path, capfd):
    out = world.attack(name, tmp_path, "process")
    assert_contained(world, out, "process", capfd)
    assert_said(out, name)
    assert "landlock(" in out.attack["isolation"] and "NOT CONFINED" not in out.attack["isolation"]


def cli(capfd, *args):
    assert main(list(args)) == 0
    printed = capfd.readouterr()
    assert printed.err == "", printed.err
    return printed.out


def test_a_fake_result_cannot_pass_for_the_graders(world, tmp_path, capfd):
    """The CLI prints exactly one report per submission, whatever the submission prints:
    a grade's JSON, and a check's text. (The attack's forged frames stop its child at every
    other call, so a grade starts it about 200 times: the text form is a check's, on the
    public cases alone, where a second grade took half a minute.)"""
    fake = tmp_path / "fake.py"
    fake.write_text((ATTACKS / "fake_result.py").read_text())
    secret = str(world.secret_file)
    out = cli(capfd, "grade", "lesson1", str(fake), "--secret-file", secret, "--json")
    [line] = out.splitlines()
    report = json.loads(line)
    assert report["score"] == 0 and report["submission"] == str(fake)
    out = cli(capfd, "check", "lesson1", "--submission", str(fake))
    totals = [line.split() for line in out.splitlines() if "total" in line]
    assert len(totals) == 1 and totals[0][:4] == ["total", "0", "/", "10"], out


def test_killing_the_grader_leaves_no_sandbox_running(tmp_path):
    """SIGKILL the grader while its sandbox child runs a looping submission: the sandbox dies
    with it, not at its CPU limit (which would also end it, later). The grader is frozen first
    (SIGSTOP), so it cannot end the looping call itself while the test looks; the child is
    then seen alive, hardened (its CPU limit set) and with most of that limit left. After the
    kill the child must die having used less than half of what was left: CPU time, not wall
    time, so a loaded machine does not change the verdict. A process is known by its pid and
    start time, so a pid reused by another test's process is not mistaken for a survivor."""
    looper = tmp_path / "loop.py"
    looper.write_text((ATTACKS / "loop_forever.py").read_text())
    grader = subprocess.Popen([sys.executable, "-m", "grader.cli", "check", "lesson1",
                               "--submission", str(looper)], cwd=ROOT,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    child = None
    try:
        deadline = time.monotonic() + 300    # a hang guard: a loaded machine starts slowly
        while child is None and time.monotonic() < deadline:
            time.sleep(0.02)
            if _hardened_child(descendants(grader.pid)) is None:
                continue
            os.kill(grader.pid, signal.SIGSTOP)
            mine = descendants(grader.pid)
            child = _hardened_child(mine)
            if child is None:                # ended by the grader just before the freeze
                os.kill(grader.pid, signal.SIGCONT)
        assert child is not None, "the grader never started a sandbox child"
        used, limit = _cpu_seconds(child), _cpu_limit(child)
    finally:
        os.kill(grader.pid, signal.SIGKILL)
        grader.wait()
    assert limit - used >= 0.5, f"the child had too little of its CPU limit left ({used} of {limit} s)"
    last = used
    deadline = time.monotonic() + 120
    while _living(mine) and time.monotonic() < deadline:
        last = _cpu_seconds(child) if _living({child}) else last
        time.sleep(0.02)
    assert not _living(mine), f"still running after the grader was killed: {_living(mine)}"
    assert last - used < (limit - used) / 2, (
        f"the child used {last - used:.2f} of its {limit - used:.2f} CPU seconds left after the "
        "grader was killed: it ran on to its CPU limit instead of dying with the grader")


def _hardened_child(procs: set) -> "Proc | None":
    """The sandbox child, once it has set its CPU limit (before any learner code runs)."""
    for p in procs:
        if "child.py" in p.command and _living({p}) and _cpu_limit(p) is not None:
            return p
    return None


def _cpu_seconds(p: "Proc") -> float:
    fields = _stat(p.pid)
    return 0.0 if fields is None else (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cpu_limit(p: "Proc") -> float | None:
    """The soft RLIMIT_CPU of a process in seconds, or None when it has none (or is gone)."""
    try:
        for line in Path(f"/proc/{p.pid}/limits").read_text().splitlines():
            if line.startswith("Max cpu time"):
                soft = line.split()[3]
                return None if soft == "unlimited" else float(soft)
    except OSError:
        pass
    return None


@dataclass(frozen=True)
class Proc:
    pid: int
    started: int          # clock ticks since boot: with the pid, one process's identity
    command: str


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state first), or None."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _proc(pid: int) -> Proc | None:
    fields = _stat(pid)
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return None
    return None if fields is None else Proc(pid, int(fields[19]), command.strip())


def descendants(pid: int) -> set[Proc]:
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat(int(entry))
            if fields is not None and int(fields[1]) == pid:
                found.add(int(entry))
    frontier = set(found)
    while frontier:                      # bwrap -> its init -> the child
        frontier = {c for f in frontier for c in _children(f)} - found
        found |= frontier
    return {p for p in map(_proc, found) if p is not None}


def _children(pid: int) -> set:
    try:
        return {int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()}
    except (OSError, ValueError):
        return set()


def _living(procs: set[Proc]) -> list[Proc]:
    """Those still running: the same pid with the same start time, and not a zombie waiting
    for a reaper."""
    out = []
    for p in procs:
        fields = _stat(p.pid)
        if fields is not None and int(fields[19]) == p.started and fields[0] != "Z":
            out.append(p)
    return out

"""The grader's side of the sandbox: start the child, send calls, read answers, enforce time.

Everything the child sends is hostile input. It arrives as length-prefixed JSON, is
parsed with NaN, infinities and oversized integers turned into rejections, and is handed
on as plain JSON values (dicts, lists, str, int, float, bool, None). Turning those into
trusted shapes is grader.engine.validate's job. Nothing is ever unpickled.

Time is enforced here, not in the child: a wall-clock deadline per call (the child
answers each call in its own frame, so a hang is pinned to its call) and a budget for
the whole session. A hung, crashed or misbehaving child is killed with its process
group and replaced on the next call, so one bad call costs only itself.

How the child is contained (bubblewrap, or a plain process) is grader.engine.sandbox.isolation's
job; `Sandbox.isolation` says what was in force, and every report carries it.

The wire protocol (two pipes; a frame is a 4-byte big-endian length, then that many bytes
of UTF-8 JSON; at most MAX_FRAME bytes, and a child's frames past ANSWER_FREE bytes draw
on the submission's ANSWER_ALLOWANCE):
  grader -> child  {"shapes_source", "submission", "filename", "workdir", "limits",
                    "require_confinement": bool, "cells": [[first line, cell number], ...],
                    "start": this child's number, 0 for a Sandbox's first}
  child -> grader  {"isolation": [layers...], "lacks": "..."}    hardened, nothing of the
                   learner's has run; "lacks" names what confinement is missing ("" none).
                   With require_confinement and something missing, instead
                   {"isolation": [...], "refused": "..."}, and the child exits: Unconfined.
  child -> grader  {"loaded": true} | {"loaded": false, "error": "..."}   (+ "stdout")
  grader -> child  {"calls": [[function, [args...]], ...]}     at most BATCH calls
  child -> grader  one frame per call, in order: {"ok": value} | {"raised": "..."} |
                   {"missing": "..."} | {"bad": "..."}          (+ "stdout")
Arguments and values are plain JSON; a reference.shapes dataclass is an object with
"__type__": its class name, and its fields by name (answers) or, in the grader's calls,
"__fields__": their values in order (a dict an answer holds never has the key: the child
refuses one, so no dict passes for a class). Each call's frame is awaited with its own deadline, so a hang
is pinned to its call; everything before it is kept.
"""
from __future__ import annotations

import contextlib
import importlib.util
import math
import os
import py_compile
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from dataclasses import dataclass
from pathlib import Path

from grader.engine.errors import InputError
from grader.engine.sandbox import affinity
from grader.engine.sandbox import isolation as containment
from grader.engine.sandbox.wire import ProtocolError, dumps, parse_answer, wire_arg
from grader.engine.text import one_line, printable
from reference import shapes

CHILD = Path(__file__).with_name("child.py")
PYTHON = sys.executable    # any Python >= 3.11 runs child.py: it needs only the standard library
SHAPES_SOURCE = Path(shapes.__file__).read_text(encoding="utf-8")
STATUSES = ("ok", "raised", "missing", "bad", "timeout", "crashed", "unavailable")
BATCH = 200                 # calls per request frame
TIMEOUTS_PER_BATCH = 2      # hangs of one function before its other probes are skipped
MAX_FRAME = 8 << 20         # bytes; a larger frame is an attack or a runaway, not an answer
# A frame parses into up to ~25 times its size in objects ("[[],[],...]"), and a batch's
# answers (and a criterion's recorded public ones) are all held before any is validated:
# 8 MiB frames, one per call, held the grader's memory hostage (about 200 MB an answer).
# An honest answer is a few hundred bytes, its printed output at most STDOUT_SEND
# characters (12 bytes each as JSON escapes): the first ANSWER_FREE bytes of every frame
# are free, and only the rest of a larger one draws on the Sandbox's ANSWER_ALLOWANCE,
# shared by its child and those that replace it. Past it a large frame is refused
# before it is parsed.
ANSWER_FREE = 16 << 10
ANSWER_ALLOWANCE = 4 << 20
READ_CHUNK = 1 << 16        # bytes per read of the child's answers (a pipe holds 64 KiB)
STDOUT_SEND = 1024          # characters of printed output kept per call
DETAIL_CHARS = 300
CHILD_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}   # nothing of the grader's environment
# The child's str hash seed is fixed, not drawn at random by each interpreter: a submission
# whose answers hang on it (a set of strings iterated, hash() itself) gets the same grade
# every time it is graded. Each start of a Sandbox takes the next seed, so a restarted
# child is still a process with another seed (lesson 4's key-deterministic check).
FIRST_HASH_SEED = 1
# -I without its -E: the environment is CHILD_ENV alone, and PYTHONHASHSEED must be read.
CHILD_FLAGS = ("-P", "-s", "-S")


def child_program(source: Path) -> Path:
    """What the interpreter runs as the child: child.py's bytecode when it is current, so
    that no child compiles 1,100 lines at its start (some 11 ms of every start, in every
    check and twice in every grade); child.py itself where no current bytecode can be had.

    The bytecode is the sandbox's own file beside the module's in __pycache__
    (child.sandbox.<tag>.pyc, a name no import reads), written as Python writes a module's
    (never under PYTHONDONTWRITEBYTECODE) and run only while it matches the source's time and
    size, as the import system checks a module's: trusted as Python trusts the grader's own.
    It names its code /sandbox/child.py, where bubblewrap binds the child, so a submission
    reading the child's frames learns no folder of the host's (an install's compiled
    child.py would name the install's)."""
    try:
        module_pyc = Path(importlib.util.cache_from_source(str(source)))
    except NotImplementedError:         # an interpreter that keeps no bytecode cache
        return source
    cached = module_pyc.with_name(module_pyc.name.replace(".", ".sandbox.", 1))
    if not _current(cached, source) and not sys.dont_write_bytecode:
        try:
            py_compile.compile(str(source), cfile=str(cached), dfile=containment.CHILD_INSIDE,
                               doraise=True, invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP)
        except (OSError, py_compile.PyCompileError):
            return source
    return cached if _current(cached, source) else source


def _current(cached: Path, source: Path) -> bool:
    """Whether ``cached`` is this interpreter's timestamp-checked bytecode of ``source`` as
    it is now (the checks the import system makes of a module's)."""
    try:
        with open(cached, "rb") as f:
            head = f.read(16)
        stat = source.stat()
    except OSError:
        return False
    return (head[:4] == importlib.util.MAGIC_NUMBER and head[4:8] == bytes(4)
            and int.from_bytes(head[8:12], "little") == int(stat.st_mtime) & 0xFFFFFFFF
            and int.from_bytes(head[12:16], "little") == stat.st_size & 0xFFFFFFFF)


def child_env(start: int) -> dict[str, str]:
    """The environment of a Sandbox's ``start``-th child (0 for the first)."""
    return {**CHILD_ENV, "PYTHONHASHSEED": str(FIRST_HASH_SEED + start)}


@dataclass(frozen=True)
class Limits:
    """What one submission may spend. DEFAULT_LIMITS applies where a Sandbox is not told
    otherwise (tests of hostile code lower it so each attack is cut short quickly)."""
    call_timeout_s: float = 2.0      # wall clock per call
    run_timeout_s: float = 60.0      # wall clock for the whole submission
    load_timeout_s: float = 10.0     # start + loading the file
    memory_bytes: int = 1 << 30      # RLIMIT_AS
    cpu_seconds: int | None = None   # RLIMIT_CPU; None: the run budget + 1 s
    tmp_bytes: int = 16 << 20        # the tmpfs working directory (bwrap's /tmp; the fallback's as root)


DEFAULT_LIMITS = Limits()


@dataclass(frozen=True)
class CallResult:
    status: str             # one of STATUSES
    value: object = None    # plain JSON when status == "ok"; never an instance of a class
    detail: str = ""        # one line for feedback
    stdout: str = ""        # what the call printed (first KiB)
    # The child broke the wire's rules on this call (an oversized answer, say) and the grader
    # stopped it: the next call starts another and loads the file again. A hang or a crash
    # stops it too, and says so by its status ("timeout", "crashed"), not by this flag.
    stopped: bool = False

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def stub(self) -> bool:
        """The exercise file's stub answered: the function raises NotImplementedError."""
        return self.status == "raised" and self.detail.lstrip().startswith("NotImplementedError")


class Budget:
    """The wall-clock seconds a submission may spend in one sandbox: its calls, and the
    grader's own work on its answers between them (``charge``), so a submission buys no
    more time by making the grader work for it."""

    def __init__(self, seconds: float):
        self.seconds, self.spent = float(seconds), 0.0

    @property
    def remaining(self) -> float:
        return self.seconds - self.spent

    def charge(self, seconds: float) -> None:
        self.spent += max(0.0, seconds)


class SandboxError(RuntimeError):
    """The sandbox itself could not start (before any learner code ran): a grader problem."""


UNCONFINED_FLAG = "--dangerously-grade-without-confinement"


class Unconfined(InputError):
    """Confinement was required (a grade) and cannot be built here; no learner code ran.
    One line: what is missing, what to install or how to run, and the flag that accepts
    the risk."""

    def __init__(self, lacks: str, describe: str):
        super().__init__("sandbox", f"refusing to grade: a submission here could read the course, "
                         f"the secret and the gradebook ({describe}; it lacks {lacks}). "
                         f"{containment.ADVICE}, or pass {UNCONFINED_FLAG} to grade at that risk")
        self.lacks, self.describe = lacks, describe


class _Timeout(Exception):
    pass


class _Ended(Exception):            # EOF or a broken pipe: the child is gone
    pass


class _Child:
    """One child process and its pipes. kill() is idempotent and leaves nothing behind."""

    def __init__(self, proc, wfd, rfd, workdir, wrapped=False):
        self.proc, self.wfd, self.rfd, self.workdir = proc, wfd, rfd, workdir
        self.wrapped = wrapped          # under bwrap, which reports a signal death as 128 + n
        self.buf, self.pos = bytearray(), 0
        # Reads land in this buffer, reused: os.read(fd, n) allocates n bytes at every read,
        # and a 1 MiB allocation is an mmap, an mremap and a munmap per answer.
        self.scratch = memoryview(bytearray(READ_CHUNK))
        self.poll = select.poll()
        self.poll.register(rfd, select.POLLIN)

    def send(self, obj, deadline):
        data = dumps(obj).encode()
        view = memoryview(len(data).to_bytes(4, "big") + data)
        poll = None
        while view:
            # Non-blocking writes: a child that stops reading must not stall the grader.
            try:
                view = view[os.write(self.wfd, view):]
                continue
            except BlockingIOError:
                pass
            except OSError as exc:          # EPIPE: the child is gone
                raise _Ended from exc
            if poll is None:
                poll = select.poll()
                poll.register(self.wfd, select.POLLOUT)
            if not poll.poll(_ms_left(deadline)):
                raise _Timeout

    def recv(self, deadline):
        """The next frame's bytes; _Timeout, _Ended or ProtocolError otherwise."""
        while True:
            have = len(self.buf) - self.pos
            if have >= 4:
                n = int.from_bytes(self.buf[self.pos:self.pos + 4], "big")
                if n > MAX_FRAME:
                    raise ProtocolError(f"sent a frame of {n} bytes (limit {MAX_FRAME})")
                if have >= 4 + n:
                    frame = self.buf[self.pos + 4:self.pos + 4 + n]
                    self.pos += 4 + n
                    if self.pos == len(self.buf):
                        self.buf, self.pos = bytearray(), 0
                    return frame
            if not self.poll.poll(_ms_left(deadline)):
                raise _Timeout
            try:
                got = os.readv(self.rfd, (self.scratch,))
            except BlockingIOError:
                continue
            if not got:
                raise _Ended
            self.buf += self.scratch[:got]

    def ended_how(self, wait_s=0.2):
        """Why the child ended: give it a moment to finish dying so its exit status is real."""
        try:
            code = self.proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            return "it closed its connection to the grader"
        if self.wrapped and code > 128:
            code = -(code - 128)
        if code >= 0:
            return f"the process exited with code {code}"
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = {"SIGXCPU": " (CPU time limit)", "SIGKILL": " (a resource limit)",
                "SIGSEGV": " (a crash of the interpreter, e.g. recursion too deep)"}
        return f"the process was killed by {name}{hint.get(name, '')}"

    def kill(self):
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        if self.wrapped and _kill_namespace(proc):
            try:
                proc.wait(timeout=1)            # bwrap reaps its init, then exits by itself
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)    # the group: anything it started dies too
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        for fd in (self.wfd, self.rfd):
            try:
                os.close(fd)
            except OSError:
                pass
        if self.workdir is not None:      # a host directory (the tmpfs of bwrap vanishes by itself)
            _remove_tree(self.workdir)


def _kill_namespace(proc) -> bool:
    """SIGKILL bwrap's init inside the sandbox (the whole pid namespace dies with it) while
    bwrap is alive to reap it. Killing bwrap first would orphan that init: it would die of
    --die-with-parent but stay a zombie wherever the host's pid 1 does not reap.

    The pid comes from /proc and is pinned with a pidfd, then checked to still be bwrap's
    child, so a recycled pid is never signalled."""
    try:
        with open(f"/proc/{proc.pid}/task/{proc.pid}/children") as f:
            pids = [int(p) for p in f.read().split()]
    except (OSError, ValueError):
        return False
    killed = False
    for pid in pids:
        try:
            fd = os.pidfd_open(pid)
        except OSError:
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
            if parent == proc.pid:
                signal.pidfd_send_signal(fd, signal.SIGKILL)
                killed = True
        except (OSError, ValueError, IndexError):
            pass
        finally:
            os.close(fd)
    return killed


def _remove_tree(path):
    def make_writable_and_retry(func, p, _exc):
        try:
            os.chmod(os.path.dirname(p), 0o700)
            func(p)
        except OSError:
            pass
    shutil.rmtree(path, onerror=make_writable_and_retry)


def _ms_left(deadline):
    return max(0, math.ceil((deadline - time.monotonic()) * 1000))


def _one_line(text, limit=DETAIL_CHARS):
    """Learner text for feedback: one line, bounded, and only printable characters (no
    terminal escapes, bidirectional overrides or lone surrogates survive: grader.engine.text)."""
    return one_line(str(text)[:limit * 4], limit)


def _clean_stdout(text):
    return printable(text[:STDOUT_SEND], keep="\n\t")


def _start_child(plan, start: int) -> _Child:
    """A child of ``plan``, a Sandbox's ``start``-th (0 for its first), told nothing yet."""
    # Under bwrap the working directory is the sandbox's own tmpfs; otherwise a fresh
    # private host directory, removed with the child.
    host_dir = None if plan.workdir else tempfile.mkdtemp(prefix="grader-sandbox-")
    req_r, req_w = os.pipe()
    resp_r, resp_w = os.pipe()
    try:
        proc = subprocess.Popen(
            [*plan.wrapper, plan.python, *CHILD_FLAGS, plan.child_path, str(req_r), str(resp_w)],
            env=child_env(start), cwd=host_dir or "/", stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, pass_fds=(req_r, resp_w))
    except BaseException:
        for fd in (req_r, req_w, resp_r, resp_w):
            os.close(fd)
        if host_dir is not None:
            _remove_tree(host_dir)
        raise
    os.close(req_r)
    os.close(resp_w)
    os.set_blocking(req_w, False)
    os.set_blocking(resp_r, False)
    return _Child(proc, req_w, resp_r, host_dir, plan.wrapped)


class Sandbox:
    """A submission loaded in an isolated child process. Not thread-safe: one user at a time.

    The child starts in the constructor and loads the submission while the caller goes on
    (preparing its cases); the first use (load_error, isolation, a call) awaits the load, so
    a child that cannot start raises SandboxError there.

    with Sandbox(source, "exercise.py") as box:
        if box.load_error: ...
        result = box.call("check_contract", model, worker, request)
    """

    def __init__(self, submission_source: str, filename: str, *,
                 call_timeout_s: float | None = None, run_timeout_s: float | None = None,
                 memory_bytes: int | None = None, cpu_seconds: int | None = None,
                 load_timeout_s: float | None = None, isolation: str | None = None,
                 require_confinement: bool = False, cells: tuple[tuple[int, int], ...] = ()):
        """Limits not given come from DEFAULT_LIMITS. `isolation`: "auto" (bwrap when it
        works here, else a plain process), "bwrap" (required) or "process"; None reads
        $GRADER_SANDBOX, default auto. `require_confinement`: a child that cannot be
        confined (see `confined`) loads nothing, and the first use raises Unconfined.
        `cells`: a notebook's (Submission.cells), so the child names a line by its cell."""
        d = DEFAULT_LIMITS
        self._source = submission_source
        self._cells = [[int(first), int(cell)] for first, cell in cells]
        self._filename = os.path.basename(filename) or "exercise.py"
        self.call_timeout_s = d.call_timeout_s if call_timeout_s is None else call_timeout_s
        self.budget = Budget(d.run_timeout_s if run_timeout_s is None else run_timeout_s)
        self.run_timeout_s = self.budget.seconds
        self.load_timeout_s = d.load_timeout_s if load_timeout_s is None else load_timeout_s
        memory_bytes = d.memory_bytes if memory_bytes is None else memory_bytes
        cpu_seconds = d.cpu_seconds if cpu_seconds is None else cpu_seconds
        if cpu_seconds is None:          # a backstop behind the wall clock, which acts first
            cpu_seconds = math.ceil(self.run_timeout_s) + 1
        self._limits = {"as": int(memory_bytes), "cpu": int(cpu_seconds), "fsize": 1 << 20,
                        "tmp": 0,
                        "nofile": 64, "stdout_keep": 4096, "stdout_send": STDOUT_SEND,
                        "max_frame": MAX_FRAME}
        _probed()                           # a spare's probe of bubblewrap has answered
        self._plan = containment.plan(isolation, PYTHON, child_program(CHILD), d.tmp_bytes)
        if not self._plan.wrapped:          # bwrap's own /tmp is the tmpfs already
            self._limits["tmp"] = int(d.tmp_bytes)
        self._require = bool(require_confinement)
        self._lacks: str | None = None      # what confinement the child lacks ("" none)
        self._bulk_spent = 0                # bytes of frames beyond ANSWER_FREE each
        self._child: _Child | None = None
        self._holder: list = [None]      # what the finalizer kills if close() is never called
        self._pins: list = []            # the CPU pinning of each load (affinity), undone at close
        self._finalizer = weakref.finalize(self, _kill_held, self._holder, self._pins)
        self._load_stdout = ""
        self._called_printed = False     # some call printed: the report says so, never what
        self._starts = 0                 # children started so far: the next one's hash seed
        self._isolation = f"{self._plan.describe}: the child did not start"
        # The child loads the submission while the grader prepares its cases: the load is
        # awaited at the first use (load_error or a call), not here.
        self._loading: float | None = None       # when the pending load's request was sent
        self._load_error: str | None = self._begin()

    @property
    def load_error(self) -> str | None:
        """Why the submission could not be loaded, or None (waits for a pending load)."""
        if self._loading is not None:
            self._load_error = self._charged(self._await_load)
        return self._load_error

    @property
    def isolation(self) -> str:
        """How the child is contained, as it reported it (waits for a pending load)."""
        self.load_error
        return self._isolation

    @property
    def confined(self) -> bool:
        """True when the child can neither read the course, the secret or the gradebook nor
        write anything of the grader's: bubblewrap's empty root, or a plain process with
        Landlock, a seccomp allow list and no capabilities (waits for a pending load)."""
        self.load_error
        return self._plan.wrapped or self._lacks == ""

    @property
    def lacks(self) -> str:
        """What confinement the child lacks, in words ('' when it is confined)."""
        return "" if self.confined else (self._lacks or "a child that reported its isolation")

    @property
    def load_stdout(self) -> str:
        """What the submission printed while loading (waits for a pending load)."""
        self.load_error
        return self._load_stdout

    @property
    def printed(self) -> bool:
        """Whether the submission printed anything, loading or in a call (waits for a
        pending load). What it printed is never shown: a hidden case's inputs would be."""
        return bool(self.load_stdout) or self._called_printed

    # ------------------------------------------------------------------ public API

    def call(self, fname: str, *args) -> CallResult:
        if self._child is None or self._loading is not None or self.budget.remaining <= 0:
            return self.call_each([(fname, args)])[0]
        # A loaded child and budget left: _calls' loop would send this one batch.
        return self._run_batch([[fname, [wire_arg(a) for a in args]]])[0]

    def call_many(self, fname: str, arg_tuples) -> list[CallResult]:
        """Probes of one function: once it has hung TIMEOUTS_PER_BATCH times, the rest are
        not run."""
        return self._calls([[fname, [wire_arg(a) for a in args]] for args in arg_tuples],
                           give_up=TIMEOUTS_PER_BATCH)

    def call_each(self, calls) -> list[CallResult]:
        """``[self.call(f, *args) for f, args in calls]``, in as few round trips as the
        answers allow: for calls none of which depends on another's answer (the calls of
        several runs at one moment, grader.engine.together). A hang, a crash or a
        malformed answer costs its own call, as it would alone: the child is replaced and
        the calls after it are sent again."""
        return self._calls([[f, [wire_arg(a) for a in args]] for f, args in calls], give_up=None)

    def _calls(self, requests, give_up):
        results: list[CallResult] = []
        while len(results) < len(requests):
            if self.load_error is not None:
                why = f"{self._filename} did not load: {self.load_error}"
                return results + [CallResult("unavailable", detail=_one_line(why))] * (len(requests) - len(results))
            if self._remaining() <= 0:
                why = f"the time budget for this submission ({self.run_timeout_s:g} s) is spent"
                return results + [CallResult("unavailable", detail=why)] * (len(requests) - len(results))
            if self._child is None:
                error = self._start()
                if error is not None:
                    results.append(CallResult("crashed", detail=_one_line(
                        f"the process running {self._filename} was restarted and failed: {error}")))
                    continue
            start = len(results)
            results += self._run_batch(requests[start:start + BATCH])
            if give_up and sum(r.status == "timeout" for r in results) >= give_up:
                # A function that hangs twice would spend the whole budget one probe at a
                # time; the rest of its probes are not run (and count as unanswered).
                fname = requests[0][0]
                why = f"not called: {fname}() already failed to return {give_up} times"
                return results + [CallResult("unavailable", detail=why)] * (len(requests) - len(results))
        return results

    def restart(self) -> None:
        """End the child; the next call loads the submission in a fresh process (new module
        state, the next str hash seed: child_env; clocks that read later and other process
        ids: child.py's another_process), charged to the same run budget."""
        self._kill()

    def close(self) -> None:
        self._kill()
        _unpin(self._pins)
        self._finalizer.detach()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ------------------------------------------------------------------ internals

    def _remaining(self):
        return self.budget.remaining

    def _charged(self, fn, *args):
        """Run fn, charging its wall time to the run budget."""
        t0 = time.monotonic()
        try:
            return fn(*args)
        finally:
            self.budget.charge(time.monotonic() - t0)

    def _start(self):
        """Start and load a fresh child. Returns None, or why it could not load."""
        error = self._begin()
        return error if error is not None else self._charged(self._await_load)

    def _begin(self):
        """Spawn a child, its time charged: None (the load is pending), or why not."""
        if self._remaining() <= 0:
            return f"the time budget for this submission ({self.run_timeout_s:g} s) is spent"
        return self._charged(self._spawn)

    def _spawn(self):
        """Start a child (or take the spare one: spare()) and send it the submission; None
        (the load is pending)."""
        plan = self._plan
        child = _take_spare(plan) if self._starts == 0 else None
        self._child = self._holder[0] = child or _start_child(plan, self._starts)
        self._starts += 1
        self._loading = time.monotonic()
        try:
            self._child.send({"shapes_source": SHAPES_SOURCE, "submission": self._source,
                              "filename": self._filename, "workdir": plan.workdir or self._child.workdir,
                              "limits": self._limits, "cells": self._cells,
                              # Which start this is: a restarted child's clocks read later
                              # and its process ids otherwise (child.py: another_process).
                              "start": self._starts - 1,
                              # Under bwrap the empty root is the confinement itself.
                              "require_confinement": self._require and not plan.wrapped},
                             self._loading + self.load_timeout_s)
        except (_Timeout, _Ended) as exc:
            self._loading = None
            how = self._child.ended_how() if isinstance(exc, _Ended) else type(exc).__name__
            self._kill()
            raise SandboxError(f"the sandbox child did not start ({how}; "
                               f"{self._plan.describe}; {PYTHON} {CHILD})") from None
        except BaseException:
            self._loading = None
            self._kill()
            raise
        return None

    def _await_load(self):
        """The pending load's outcome: None, or why the submission could not be loaded."""
        start, self._loading = self._loading, None
        try:
            error = self._load(start)
        except BaseException:
            self._kill()
            raise
        if error is None and threading.current_thread() is threading.main_thread():
            # Its start-up ran beside the grader's preparation; from here the two take
            # turns, and a turn is cheaper on one CPU (grader.engine.sandbox.affinity).
            self._pins.append(affinity.colocate(self._child.proc.pid))
        return error

    def _load(self, start):
        try:
            # Until the child reports its isolation, only grader code has run in it: a
            # failure here is the grader's, not the submission's.
            deadline = start + self.load_timeout_s
            hello, _ = parse_answer(self._child.recv(deadline))
            steps = hello.get("isolation")
        except (_Timeout, _Ended, ProtocolError) as exc:
            how = self._child.ended_how() if isinstance(exc, _Ended) else type(exc).__name__
            raise SandboxError(f"the sandbox child did not start ({how}; "
                               f"{self._plan.describe}; {PYTHON} {CHILD})") from None
        if type(steps) is list and all(type(s) is str for s in steps):
            self._isolation = _one_line(
                f"{self._plan.describe}: " + ", ".join(steps)
                + ", clean env, empty cwd, no site-packages", 800)
        refused, lacks = hello.get("refused"), hello.get("lacks")
        if type(refused) is str and refused:
            self._kill()
            raise Unconfined(refused, self._plan.describe)
        self._lacks = lacks if type(lacks) is str else None
        if not self.confined:
            self._isolation = _one_line(f"NOT CONFINED (lacks {self.lacks}): {self._isolation}", 900)
        try:
            frame = self._child.recv(min(deadline, start + self._remaining()))
            self._draw(len(frame))          # learner code has run: its frame, its allowance
            loaded, _ = parse_answer(frame)
        except _Timeout:
            self._kill()
            return f"loading {self._filename} did not finish within {self.load_timeout_s:g} s"
        except _Ended:
            how = self._child.ended_how()
            self._kill()
            return f"{how} while loading {self._filename}"
        except ProtocolError as exc:
            self._kill()
            return f"the process {exc} while loading {self._filename}"
        if type(loaded.get("stdout")) is str:
            self._load_stdout = _clean_stdout(loaded["stdout"])
        if loaded.get("loaded") is True:
            return None
        self._kill()
        error = loaded.get("error")
        return _one_line(error if type(error) is str else "it could not be loaded")

    def _run_batch(self, calls):
        """Send one request frame; collect answers until the first failure (>= 1 result)."""
        child = self._child
        results = []
        t0 = time.monotonic()
        budget_end = t0 + self._remaining()
        try:
            child.send({"calls": calls}, min(t0 + self.call_timeout_s, budget_end))
            for _ in calls:
                # Each call gets call_timeout_s from the answer before it (or from the send).
                frame = child.recv(min(time.monotonic() + self.call_timeout_s, budget_end))
                self._draw(len(frame))
                results.append(self._result(calls[len(results)][0], frame))
        except _Timeout:
            fname = calls[len(results)][0]
            if time.monotonic() >= budget_end:
                detail = (f"{fname}() was stopped: the time budget for this submission "
                          f"({self.run_timeout_s:g} s) ran out")
            else:
                detail = f"{fname}() did not return within {self.call_timeout_s:g} s"
            results.append(CallResult("timeout", detail=detail))
            self._kill()
        except _Ended:
            fname = calls[len(results)][0]
            results.append(CallResult("crashed", detail=_one_line(
                f"{fname}() ended the process running {self._filename}: {child.ended_how()}")))
            self._kill()
        except ProtocolError as exc:
            fname = calls[len(results)][0]
            results.append(CallResult("bad", detail=_one_line(f"during {fname}() the process {exc}"),
                                      stopped=True))
            self._kill()
        except BaseException:
            self._kill()        # interrupted mid-batch: its unread answers must not reach the next call
            raise
        finally:
            self.budget.charge(time.monotonic() - t0)
        return results

    def _draw(self, size):
        """Charge a frame of ``size`` bytes to the allowance; ProtocolError when it is spent."""
        extra = size - ANSWER_FREE
        if extra <= 0:
            return
        if self._bulk_spent + extra > ANSWER_ALLOWANCE:
            raise ProtocolError(f"sent an answer of {size} bytes after {self._bulk_spent / 2**20:.1f} MiB "
                            f"of large answers (every answer over {ANSWER_FREE >> 10} KiB draws "
                            f"on {ANSWER_ALLOWANCE >> 20} MiB shared by all its calls; the "
                            f"course's answers are a few hundred bytes)")
        self._bulk_spent += extra

    def _result(self, fname, frame):
        msg, rejected = parse_answer(frame)
        stdout = msg.get("stdout", "")
        if type(stdout) is not str:
            raise ProtocolError("sent a malformed answer")
        if stdout:
            stdout = _clean_stdout(stdout)
            self._called_printed = True
        if rejected is not None:
            return CallResult("bad", detail=rejected, stdout=stdout)
        if "ok" in msg:
            return CallResult("ok", msg["ok"], "", stdout)
        if "missing" in msg:
            return CallResult("missing", detail=f"{self._filename} does not define a function "
                                                f"{fname}()", stdout=stdout)
        for status in ("raised", "bad"):
            if type(msg.get(status)) is str:
                return CallResult(status, detail=_one_line(msg[status]), stdout=stdout)
        raise ProtocolError("sent a malformed answer")

    def _kill(self):
        if self._loading is not None:           # stopped before its load was awaited
            self._loading = None
            self._load_error = "the sandbox was stopped before the submission loaded"
        if self._child is not None:
            self._child.kill()
        self._child = self._holder[0] = None


def require_confinement(isolation: str | None = None) -> None:
    """Raise Unconfined unless a child started here is confined: asked once, before a grade
    or a class starts, so a refusal comes before any work (each grade asks again)."""
    with Sandbox("", "probe.py", isolation=isolation, require_confinement=True) as probe:
        probe.load_error


def _unpin(pins):
    while pins:
        pins.pop().restore()       # the latest first: only the first load pinned the thread


def _kill_held(holder, pins):
    if holder[0] is not None:
        holder[0].kill()
    _unpin(pins)


# ---- a spare child ---------------------------------------------------------------------------
# Started before the grader knows what it will run, taken by the first Sandbox of its plan.
_spares: list = []          # [(Plan, _Child)] not taken yet: at most one
_probes: list = []          # the threads probing bubblewrap meanwhile


@contextlib.contextmanager
def spare(isolation: str | None = None):
    """Within the block, the first Sandbox of the plan this child is started under takes it
    instead of starting its own. ``grader check`` opens the block before it imports the
    lesson and reads its cases, so that a child's start (bubblewrap, the interpreter, the
    child's imports: some 100 ms) and the probe of bubblewrap (grader.engine.sandbox.isolation)
    go by beside that work instead of after it. Until a Sandbox takes the child it is told
    nothing, not even the submission: it is the child that Sandbox would have started, started
    earlier, and one of any other plan than the probe's answer is never taken. One not taken
    is killed when the block ends."""
    if _spares:                     # a block within a block: the outer one's child serves
        yield
        return
    program = child_program(CHILD)
    plan = containment.unprobed_plan(isolation, PYTHON, program, DEFAULT_LIMITS.tmp_bytes)
    if plan is not None and plan.wrapped:
        probe = threading.Thread(target=containment.bwrap_problem, args=(PYTHON, str(program)), daemon=True)
        probe.start()
        _probes.append(probe)
    try:
        if plan is not None:
            try:
                _spares.append((plan, _start_child(plan, 0)))
            except OSError:
                pass            # no spare: the Sandbox starts its own, and says what stops it
        yield
    finally:
        _probed()
        while _spares:
            _spares.pop()[1].kill()


def _take_spare(plan):
    """The spare child when it was started under ``plan``, else None (and it stays)."""
    try:
        if _spares[0][0] == plan:
            return _spares.pop()[1]
    except IndexError:          # none, or another thread's Sandbox took it meanwhile
        pass
    return None


def _probed() -> None:
    while True:
        try:
            probe = _probes.pop()
        except IndexError:
            return
        probe.join()

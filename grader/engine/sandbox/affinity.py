"""The grader and its sandbox child on one CPU: a round trip without a cross-CPU wakeup.

The grader and the child take turns: one waits in poll() while the other computes, so they
never need two CPUs at once. On two CPUs, though, every answer wakes a task sleeping on
the other CPU, which costs an inter-processor interrupt (in a virtual machine, an exit to
the hypervisor). Measured on the course's 2-core build machine on 2026-12-03: a bare pipe
ping-pong between two processes took 150 us a round trip across CPUs and 10 us on one;
a sandbox call of an identity function 335 us and 126 us, with the grader's CPU per call
155 us and 78 us.

So once a child has loaded the submission (its start-up, in parallel with the grader's
preparation, is over), the calling thread and the child's process tree are pinned to the
CPU the thread is on. The thread's mask is restored when the sandbox closes. A thread
already on one CPU (``taskset``, or another sandbox of the same grade) is left as it is,
and the child joins it there. A child the grader may not pin (another user's process) is
left where it is: co-location is a speed-up, never a condition of a grade, and changes
no answer. ``GRADER_COLOCATE=off`` turns it off.

Only a process's main thread pins itself: a `grader check` or `grader grade`, or a worker
of a class graded with --jobs, each of which grades one submission at a time. Threads
(a Dask worker's tasks) are left to the scheduler: several of them pinning themselves to
whichever CPU each was on could pile onto one. A class's pool gives each worker a CPU of
its own when there are enough (``claim_cpu``), so two workers never share one; with
more workers than CPUs, its workers do not co-locate at all. Two graders started by hand
at once are not coordinated: each pins itself to the CPU it is on, and they may share
one (the kernel usually has them apart, since each pair keeps its CPU busy).

A submission gains nothing from it: its child and its threads share the grader's one CPU,
so it cannot take a second core while the grader waits for it.
"""
from __future__ import annotations

import os
import threading

VARIABLE = "GRADER_COLOCATE"      # on (default) | off


def enabled() -> bool:
    return os.environ.get(VARIABLE, "on").strip().lower() not in ("off", "0", "no", "false") \
        and hasattr(os, "sched_setaffinity")


def current_cpu() -> int | None:
    """The CPU the calling thread runs on (field 39 of its /proc stat line), or None."""
    try:
        with open(f"/proc/self/task/{threading.get_native_id()}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[36])
    except (OSError, ValueError, IndexError):
        return None


def tree(pid: int) -> list[int]:
    """``pid`` and its descendants, as /proc lists them (bwrap, its init, the child)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
        except (OSError, ValueError):
            pass
    return out


def _pin_process(pid: int, cpus: set[int]) -> None:
    # Every thread of it: a mask is per thread, and a thread started later inherits its
    # starter's. The tree was read from /proc a moment ago, right after the child
    # answered, and bwrap (the grader's own child, unreaped) holds it together.
    try:
        tasks = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except (OSError, ValueError):
        return
    for tid in tasks:
        try:
            os.sched_setaffinity(tid, cpus)
        except OSError:
            pass


class Colocation:
    """The pinning one sandbox made: ``restore()`` undoes the thread's part of it."""

    def __init__(self, tid: int | None = None, original: set[int] | None = None):
        self._tid, self._original = tid, original

    def restore(self) -> None:
        tid, self._tid = self._tid, None
        if tid is None:
            return
        try:
            os.sched_setaffinity(tid, self._original)
        except OSError:
            pass            # the thread has ended: its mask went with it


def claim_cpu(index: int, workers: int) -> None:
    """A class's pool worker ``index`` of ``workers``: pin this process to a CPU of its own,
    or, with fewer CPUs than workers, turn co-location off in it."""
    if not enabled():
        return
    cpus = sorted(os.sched_getaffinity(0))
    if workers > len(cpus):
        os.environ[VARIABLE] = "off"
        return
    try:
        os.sched_setaffinity(0, {cpus[index % len(cpus)]})
    except OSError:
        os.environ[VARIABLE] = "off"


def colocate(child_pid: int) -> Colocation:
    """Pin the calling thread and the process tree of ``child_pid`` to the thread's CPU.
    The caller decides which threads may (the sandbox: a process's main thread only)."""
    if not enabled():
        return Colocation()
    tid = threading.get_native_id()
    try:
        original = os.sched_getaffinity(tid)
    except OSError:
        return Colocation()
    if len(original) == 1:
        cpu, pinned = next(iter(original)), Colocation()      # already on one CPU: join it
    else:
        cpu = current_cpu()
        if cpu is None or cpu not in original:
            return Colocation()
        try:
            os.sched_setaffinity(tid, {cpu})
        except OSError:
            return Colocation()
        pinned = Colocation(tid, original)
    for pid in tree(child_pid):
        _pin_process(pid, {cpu})
    return pinned

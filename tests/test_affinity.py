"""The grader and its sandbox child on one CPU (grader.engine.sandbox.affinity).

The sandbox's use of it runs in a fresh interpreter: only a process's main thread
co-locates, and a test runner's thread may not be one. The module's pieces are tested in
this process, each test restoring the masks and the environment it changed. What is
asserted are the masks the kernel reports, never a time.
"""
import json
import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from conftest import ROOT
from grader.engine.sandbox import affinity

PROBE = textwrap.dedent("""
    import json, os, sys, threading
    from grader.engine.sandbox import Sandbox, affinity

    def descendants():
        return [p for p in affinity.tree(os.getpid()) if p != os.getpid()]

    def masks(pids):
        return [sorted(os.sched_getaffinity(p)) for p in pids]

    def probe(out):
        out["before"] = sorted(os.sched_getaffinity(0))
        with Sandbox("def f(x):\\n    return x\\n", "t.py") as box:
            out["answers"] = [box.call("f", i).value for i in (1, 2)]
            out["during"] = sorted(os.sched_getaffinity(0))
            out["children"] = masks(descendants())
            box.restart()                       # a replaced child, loaded while pinned
            out["answers"].append(box.call("f", 3).value)
            out["restarted"] = masks(descendants())
        out["after"] = sorted(os.sched_getaffinity(0))

    out = {"cpus": sorted(os.sched_getaffinity(0))}
    if sys.argv[1] == "pinned":                 # the grader already on one CPU (taskset)
        os.sched_setaffinity(0, {max(out["cpus"])})
    if sys.argv[1] == "thread":                 # a Dask worker's task
        worker = threading.Thread(target=probe, args=(out,))
        worker.start()
        worker.join()
    else:
        probe(out)
    print(json.dumps(out))
""")


def run_probe(how: str, **env) -> dict:
    done = subprocess.run([sys.executable, "-c", PROBE, how], capture_output=True, text=True,
                          timeout=120, cwd=ROOT, env={**os.environ, **env})
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def test_the_child_joins_the_graders_cpu_and_the_mask_comes_back():
    out = run_probe("main")
    assert out["answers"] == [1, 2, 3]
    assert out["before"] == out["after"] == out["cpus"]
    assert len(out["during"]) == 1 and out["during"][0] in out["cpus"]
    # bwrap, its init and the child (or the plain child): every one on the grader's CPU.
    assert out["children"] and all(m == out["during"] for m in out["children"])
    assert out["restarted"] and all(m == out["during"] for m in out["restarted"])


def test_a_grader_on_one_cpu_keeps_it_and_the_child_joins_it():
    out = run_probe("pinned")
    one = [max(out["cpus"])]
    assert out["answers"] == [1, 2, 3]
    assert out["before"] == out["during"] == out["after"] == one
    assert out["children"] and all(m == one for m in out["children"])


@pytest.mark.parametrize("how,env", [("main", {"GRADER_COLOCATE": "off"}), ("thread", {})],
                         ids=["turned off", "not the main thread"])
def test_nothing_is_pinned_when_off_or_in_a_thread(how, env):
    out = run_probe(how, **env)
    assert out["answers"] == [1, 2, 3]
    assert out["before"] == out["during"] == out["after"] == out["cpus"]
    assert out["children"] and all(m == out["cpus"] for m in out["children"])


def _mask_of_worker(_):
    time.sleep(0.05)        # long enough that every worker of the pool takes some
    return os.getpid(), sorted(os.sched_getaffinity(0))


def test_the_class_pools_workers_start_on_cpus_of_their_own():
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from grader.instructor import batch
    cpus = sorted(os.sched_getaffinity(0))
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(max_workers=len(cpus), mp_context=context,
                             initializer=batch._start_worker,
                             initargs=(os.getpid(), context.Value("i", 0), len(cpus))) as pool:
        seen = dict(pool.map(_mask_of_worker, range(8 * len(cpus))))
    masks = sorted(seen.values())
    assert all(len(m) == 1 for m in masks)
    assert len({m[0] for m in masks}) == len(masks)      # no two workers share a CPU


# ---- the module's pieces, in this process (each restores what it changed) ----------------
def _refuse(*_):
    raise PermissionError("not allowed: another user's process")


@pytest.fixture
def sleeper():
    """A process with a child of its own, as bwrap has its init and the submission's child."""
    proc = subprocess.Popen(["/bin/sh", "-c", "sleep 60 & wait"])
    try:
        for _ in range(200):                 # until its child shows in /proc
            if len(affinity.tree(proc.pid)) > 1:
                break
            time.sleep(0.01)
        yield proc
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture
def own_mask():
    original = os.sched_getaffinity(0)
    yield original
    os.sched_setaffinity(0, original)


def masks_of(pid):
    return {p: os.sched_getaffinity(p) for p in affinity.tree(pid)}


def test_colocate_pins_the_thread_and_the_whole_tree_then_restores(sleeper, own_mask):
    assert len(masks_of(sleeper.pid)) == 2
    pins = affinity.colocate(sleeper.pid)
    now = os.sched_getaffinity(0)
    assert len(now) == 1 and now <= own_mask
    assert set(map(frozenset, masks_of(sleeper.pid).values())) == {frozenset(now)}
    pins.restore()
    assert os.sched_getaffinity(0) == own_mask
    pins.restore()                           # twice is once
    assert os.sched_getaffinity(0) == own_mask


def test_colocate_on_one_cpu_joins_it_and_restores_nothing(sleeper, own_mask):
    one = {max(own_mask)}
    os.sched_setaffinity(0, one)
    pins = affinity.colocate(sleeper.pid)
    assert set(map(frozenset, masks_of(sleeper.pid).values())) == {frozenset(one)}
    pins.restore()
    assert os.sched_getaffinity(0) == one


def test_colocate_off_changes_nothing(sleeper, own_mask, monkeypatch):
    monkeypatch.setenv(affinity.VARIABLE, "off")
    before = masks_of(sleeper.pid)
    affinity.colocate(sleeper.pid).restore()
    assert os.sched_getaffinity(0) == own_mask and masks_of(sleeper.pid) == before


def test_a_class_pool_gives_each_worker_a_cpu_of_its_own_or_none(own_mask, monkeypatch):
    monkeypatch.setenv(affinity.VARIABLE, "on")    # undone after: claim_cpu may set it
    cpus = sorted(own_mask)
    for index, cpu in enumerate(cpus):             # one each, none shared
        os.sched_setaffinity(0, own_mask)
        affinity.claim_cpu(index, len(cpus))
        assert os.sched_getaffinity(0) == {cpu}
    os.sched_setaffinity(0, own_mask)
    affinity.claim_cpu(0, len(cpus) + 1)
    assert os.sched_getaffinity(0) == own_mask
    assert os.environ[affinity.VARIABLE] == "off"


def test_current_cpu_reads_the_processor_field(own_mask):
    for cpu in (min(own_mask), max(own_mask)):      # 0 is also what a wrong field may hold
        os.sched_setaffinity(0, {cpu})
        assert affinity.current_cpu() == cpu


def test_current_cpu_of_a_thread_proc_does_not_show_is_none(monkeypatch):
    monkeypatch.setattr(affinity.threading, "get_native_id", lambda: 2**22 + 12345)
    assert affinity.current_cpu() is None


def test_claim_cpu_wraps_a_later_worker_and_uses_this_threads_cpus(own_mask, monkeypatch):
    monkeypatch.setenv(affinity.VARIABLE, "on")
    cpus = sorted(own_mask)
    affinity.claim_cpu(2 * len(cpus) + 1, len(cpus))     # a worker started after others ended
    assert os.sched_getaffinity(0) == {cpus[1 % len(cpus)]}
    os.sched_setaffinity(0, {cpus[-1]})                  # this thread's CPUs, not another's
    affinity.claim_cpu(0, 1)
    assert os.sched_getaffinity(0) == {cpus[-1]}
    os.sched_setaffinity(0, own_mask)
    affinity.claim_cpu(0, 1)                             # fewer workers than CPUs: pinned
    assert os.sched_getaffinity(0) == {cpus[0]}
    assert os.environ[affinity.VARIABLE] == "on"


def test_claim_cpu_the_kernel_refuses_turns_colocation_off(own_mask, monkeypatch):
    monkeypatch.setenv(affinity.VARIABLE, "on")
    monkeypatch.setattr(affinity.os, "sched_setaffinity", _refuse)
    affinity.claim_cpu(0, 1)
    assert os.environ[affinity.VARIABLE] == "off"


@pytest.mark.parametrize("refused", ["sched_getaffinity", "sched_setaffinity"])
def test_colocate_the_kernel_refuses_is_a_no_op(sleeper, own_mask, monkeypatch, refused):
    before = masks_of(sleeper.pid)
    monkeypatch.setattr(affinity.os, refused, _refuse)
    affinity.colocate(sleeper.pid).restore()
    monkeypatch.undo()
    assert os.sched_getaffinity(0) == own_mask and masks_of(sleeper.pid) == before


def test_colocate_with_no_cpu_to_read_is_a_no_op(sleeper, own_mask, monkeypatch):
    monkeypatch.setattr(affinity, "current_cpu", lambda: None)
    before = masks_of(sleeper.pid)
    affinity.colocate(sleeper.pid).restore()
    assert os.sched_getaffinity(0) == own_mask and masks_of(sleeper.pid) == before


def test_a_gone_process_or_thread_is_skipped_not_an_error(sleeper, own_mask):
    made = []
    worker = threading.Thread(target=lambda: made.append(affinity.colocate(sleeper.pid)))
    worker.start()
    worker.join()
    made[0].restore()                        # its thread has ended: nothing to restore
    gone = subprocess.Popen(["/bin/true"])
    gone.wait()                              # reaped: its pid names nothing now
    assert affinity.tree(gone.pid) == [gone.pid]
    affinity._pin_process(gone.pid, {min(own_mask)})
    assert os.sched_getaffinity(0) == own_mask


def test_a_task_the_grader_may_not_pin_is_left_where_it_is(sleeper, monkeypatch):
    before = masks_of(sleeper.pid)
    monkeypatch.setattr(affinity.os, "sched_setaffinity", _refuse)
    affinity._pin_process(sleeper.pid, {0})
    monkeypatch.undo()
    assert masks_of(sleeper.pid) == before


def test_current_cpu_with_parentheses_in_the_threads_name(own_mask):
    comm = f"/proc/self/task/{threading.get_native_id()}/comm"
    with open(comm) as f:
        name = f.read().strip()
    os.sched_setaffinity(0, {max(own_mask)})
    try:
        with open(comm, "w") as f:
            f.write("a) 1 (b")          # the name is the one field that may hold ") "
        assert affinity.current_cpu() == max(own_mask)
    finally:
        with open(comm, "w") as f:
            f.write(name)

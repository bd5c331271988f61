"""The grader and its sandbox child on one CPU (grader.engine.sandbox.affinity).

Each case runs in a fresh interpreter of its own: CPU masks and the environment belong to
a process, and a test must neither inherit the test runner's nor leave its own behind.
What is asserted are the masks the kernel reports, never a time.
"""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import ROOT

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


CLAIM = textwrap.dedent("""
    import json, os, sys
    from grader.engine.sandbox import affinity
    affinity.claim_cpu(int(sys.argv[1]), int(sys.argv[2]))
    print(json.dumps({"mask": sorted(os.sched_getaffinity(0)),
                      "colocate": os.environ.get(affinity.VARIABLE, "on")}))
""")


def claim(index: int, workers: int) -> dict:
    done = subprocess.run([sys.executable, "-c", CLAIM, str(index), str(workers)],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def test_a_class_pool_gives_each_worker_a_cpu_of_its_own_or_none():
    cpus = sorted(os.sched_getaffinity(0))
    masks = [claim(i, len(cpus))["mask"] for i in range(len(cpus))]
    assert masks == [[c] for c in cpus]              # one each, none shared
    crowded = claim(0, len(cpus) + 1)
    assert crowded == {"mask": cpus, "colocate": "off"}


def _mask_of_worker(_):
    import time
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

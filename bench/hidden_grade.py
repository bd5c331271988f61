"""CPU seconds of one hidden grade (lessons 2 to 4), against another checkout, side by side.

A grade as a class is graded (grader.instructor.batch): the rubric and the cases (public
and hidden) are built once per process, and every submission then gets its own two
sandbox children (public and hidden cases) and its own worker runs. The oracle's runs
are the same for every submission, so a first, untimed grade computes them; each timed
grade after it is what one more student of the class costs. The CPU counted is the
grader process's and its sandbox children's (read from /proc before each child is
killed, since bubblewrap's children are not reaped back to the grader).

    python bench/hidden_grade.py [--rounds 2] [--repeat 2] [--baseline TREE] [--lessons lesson2 ...] [--floor] [--json]

Each checkout is timed in --rounds fresh processes, each grading --repeat times after its
untimed first grade; the best grade counts. --baseline TREE times the same grades on
another checkout (a git worktree of an older commit), a process of each in turn, in the
same run: before and after saw the same machine. The scores
of both are compared, and the target (a third of the baseline's CPU per submission) is
printed as met or missed.

--floor also measures what the sandbox alone costs, with a submission that only echoes its
argument: a child's start and load, a round trip and a call, in the grader and the child.
Two starts plus this checkout's trips and calls at those prices is the least a grade can
cost with the sandbox's protocol (two children, a frame per call, no answer remembered),
before any worker run or check: the line says how much of the target that floor takes.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

from side_by_side import checkouts, dated

ROOT = Path(__file__).resolve().parent.parent
LESSONS = ("lesson2", "lesson3", "lesson4")
SECRET = b"bench-secret-for-hidden-cases"
TARGET = 3.0      # the baseline's CPU per submission over this checkout's, at least


def tree_cpu(pid: int) -> float:
    """CPU seconds of a process and its descendants, read from /proc (bubblewrap's children
    are not reaped back to the grader, so RUSAGE_CHILDREN would miss them)."""
    tick = os.sysconf("SC_CLK_TCK")
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total = (int(fields[11]) + int(fields[12])) / tick
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                total += sum(tree_cpu(int(k)) for k in f.read().split())
        return total
    except (OSError, ValueError, IndexError):
        return 0.0


def _self_cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


ECHO = "def echo(x):\n    return x\n"
FLOOR_TRIPS = 10000      # round trips per batch size: /proc counts CPU in 10 ms ticks


def _floor(starts: int) -> dict:
    """The sandbox's own prices, with a submission that does nothing but answer: CPU seconds
    of a child's start and load (the grader's and the child's), and of a round trip and of
    one more call in it, fitted from frames of one call and of eight."""
    from grader.engine.sandbox import session
    start = []
    for _ in range(starts):
        g0 = _self_cpu()
        box = session.Sandbox(ECHO, "echo.py", require_confinement=True)
        if box.load_error:
            raise SystemExit(f"bench/hidden_grade.py: the echo submission did not load: {box.load_error}")
        child = tree_cpu(box._child.proc.pid)
        box.close()
        start.append(_self_cpu() - g0 + child)
    cost = {}
    with session.Sandbox(ECHO, "echo.py", require_confinement=True) as box:
        box.load_error
        pid = box._child.proc.pid
        for size in (1, 8):
            g0, c0 = _self_cpu(), tree_cpu(pid)
            for _ in range(FLOOR_TRIPS):
                box.call_each([("echo", (7,))] * size)
            cost[size] = ((_self_cpu() - g0) / FLOOR_TRIPS, (tree_cpu(pid) - c0) / FLOOR_TRIPS)
    call = tuple((cost[8][k] - cost[1][k]) / 7 for k in (0, 1))
    trip = tuple(cost[1][k] - call[k] for k in (0, 1))
    return {"start_s": min(start), "trip_grader_s": trip[0], "trip_child_s": trip[1],
            "call_grader_s": call[0], "call_child_s": call[1]}


def floor_of(row: dict, prices: dict) -> float:
    """The least a grade with this row's trips and calls costs in the sandbox alone."""
    return (2 * prices["start_s"]
            + row["round_trips"] * (prices["trip_grader_s"] + prices["trip_child_s"])
            + row["calls"] * (prices["call_grader_s"] + prices["call_child_s"]))


def _one(lesson: str, repeat: int) -> dict:
    """In a fresh interpreter whose sys.path starts at the checkout under test."""
    from grader.engine.checks import REGISTRY
    from grader.engine.layout import Course
    from grader.engine.pipeline import build_cases, grade_submission
    from grader.engine.rubric import load_rubric
    from grader.engine.sandbox import session
    from grader.engine.submission import load_submission
    from grader.lessons import lesson_module

    children = [0.0]

    kill, batch = session._Child.kill, session.Sandbox._run_batch
    trips = [0, 0]          # request frames sent, calls they held

    def counted_batch(box, *args):      # (fname, calls) before this checkout, (calls) since
        trips[0] += 1
        trips[1] += len(args[-1])
        return batch(box, *args)
    session.Sandbox._run_batch = counted_batch

    def counted_kill(child):
        if child.proc is not None:
            children[0] += tree_cpu(child.proc.pid)
        return kill(child)
    session._Child.kill = counted_kill

    course = Course(ROOT)
    lesson_module(lesson)
    rubric = load_rubric(course.rubric_path(lesson), REGISTRY)
    cases = build_cases(lesson, course, SECRET)
    submission = load_submission(ROOT / "reference" / "solutions" / f"{lesson}.py")

    def grade():
        return grade_submission(lesson, submission, course, mode="grade", secret=SECRET,
                                rubric=rubric, cases=cases)

    scores = {c.id: c.score for c in grade().criteria}      # the oracle's runs, untimed
    times = []
    for _ in range(repeat):
        children[0], trips[:] = 0.0, [0, 0]
        own = _self_cpu()
        grade()
        grader_s = _self_cpu() - own
        times.append((grader_s + children[0], grader_s, children[0], *trips))
    best = min(times)
    return {"lesson": lesson, "cpu_s": best[0], "grader_s": best[1], "children_s": best[2],
            "round_trips": best[3], "calls": best[4], "scores": scores}


def run_on(tree: Path, lesson: str, repeat: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree), "GRADER_CACHE": "off"}
    # This script measures both checkouts (the same counting, whatever the other's script
    # does); PYTHONPATH puts the checkout under test first.
    out = subprocess.run([sys.executable, __file__,
                          "--one", lesson, "--repeat", str(repeat), "--root", str(tree)],
                         cwd=tree, env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=2, help="timed grades per process; the best counts")
    ap.add_argument("--rounds", type=int, default=2, help="processes per checkout, alternating")
    ap.add_argument("--baseline", type=Path, help="another checkout, timed alternately")
    ap.add_argument("--lessons", nargs="+", default=list(LESSONS))
    ap.add_argument("--floor", action="store_true",
                    help="also price the sandbox alone (an echo submission) and print each grade's floor")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--floor-one", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--root", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.floor_one:
        print(json.dumps(_floor(starts=5)))
        return
    if args.one:
        global ROOT
        ROOT = (args.root or ROOT).resolve()
        print(json.dumps(_one(args.one, args.repeat)))
        return
    trees = checkouts(ROOT, args.baseline)
    rows = []
    for lesson in args.lessons:
        runs: dict = {name: [] for name in trees}
        for _ in range(args.rounds):      # alternate, so load drifts hit both alike
            for name, tree in trees.items():
                runs[name].append(run_on(tree, lesson, args.repeat))
        rows.append({"lesson": lesson, **{n: min(r, key=lambda x: x["cpu_s"]) for n, r in runs.items()}})
    prices = None
    if args.floor:
        out = subprocess.run([sys.executable, __file__, "--floor-one"], cwd=ROOT, capture_output=True,
                             text=True, check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
        prices = json.loads(out.stdout.strip().splitlines()[-1])
    if args.json:
        print(json.dumps({"grades": rows, "sandbox_prices": prices}, indent=2) if prices
              else json.dumps(rows, indent=2))
        return
    print(dated(f"CPU seconds per submission, best of {args.rounds} x {args.repeat} (grader + sandbox children)"))
    head = f"{'lesson':<8} {'this: cpu s':>11} {'grader s':>9} {'children s':>10} {'trips':>6} {'calls':>6}"
    if args.baseline:
        head += (f" {'before: cpu s':>13} {'grader s':>9} {'children s':>10} {'trips':>6} "
                 f"{'speed-up':>9}  scores")
    print(head)
    for row in rows:
        t = row["this"]
        line = (f"{row['lesson']:<8} {t['cpu_s']:>11.3f} {t['grader_s']:>9.3f} {t['children_s']:>10.3f} "
                f"{t['round_trips']:>6,} {t['calls']:>6,}")
        if args.baseline:
            b = row["baseline"]
            same = "identical" if b["scores"] == t["scores"] else f"DIFFER: {b['scores']} -> {t['scores']}"
            line += (f" {b['cpu_s']:>13.3f} {b['grader_s']:>9.3f} {b['children_s']:>10.3f} "
                     f"{b['round_trips']:>6,} {b['cpu_s'] / t['cpu_s']:>8.2f}x  {same}")
        print(line)
    if args.baseline:
        print(f"\nTargets (CPU seconds; the machine may be shared)")
        for row in rows:
            ratio = row["baseline"]["cpu_s"] / row["this"]["cpu_s"]
            print(f"  {'meets ' if ratio >= TARGET else 'misses'}  {row['lesson']} hidden grade: "
                  f"{ratio:.2f}x less CPU per submission than the baseline (at least {TARGET:g}x)")
    if prices:
        print_floor(rows, prices, bool(args.baseline))


def print_floor(rows: list[dict], prices: dict, targets: bool) -> None:
    us = {k: v * 1e6 for k, v in prices.items()}
    print(f"\nThe sandbox alone (an echo submission, this checkout; CPU of the grader + the child):\n"
          f"  a child's start and load {prices['start_s'] * 1e3:.1f} ms; a round trip "
          f"{us['trip_grader_s']:.0f} + {us['trip_child_s']:.0f} us; each call in it "
          f"{us['call_grader_s']:.1f} + {us['call_child_s']:.1f} us")
    for row in rows:
        t = row["this"]
        floor = floor_of(t, prices)
        line = (f"  {row['lesson']}: 2 starts + {t['round_trips']:,} trips + {t['calls']:,} calls "
                f"= {floor:.3f} s, {floor / t['cpu_s']:.0%} of this grade's {t['cpu_s']:.3f} s")
        if targets:
            target = row["baseline"]["cpu_s"] / TARGET
            line += f"; the target is {target:.3f} s, of which the floor takes {floor / target:.0%}"
        print(line)


if __name__ == "__main__":
    main()

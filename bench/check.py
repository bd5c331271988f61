"""How fast `grader check` answers, against the bare interpreter, side by side.

The target: `grader check lessonN` on the
reference solution within 3x of the bare interpreter and import time, about a second
or less. The baseline is measured in the same run: `python -c "import numpy, yaml,
jsonschema"` after `import grader` (an interpreter that loads what the grader's stack
loads, and nothing else), then each lesson's check, alternating, best of --repeat:
cold (GRADER_CACHE=off: public cases and oracle runs computed) and warm (read back
from a cache folder a first check filled, as every check after a learner's first is).

Every timed command runs from bytecode, as an installed package does: the children's
environment drops PYTHONDONTWRITEBYTECODE, and the first, untimed check of each lesson
writes the checkout's __pycache__. With that variable set (some shells and containers
set it) every check recompiles the grader's modules, about 0.1 s of each, while the
baseline's numpy, yaml and jsonschema still load from the bytecode pip wrote: the
comparison would charge the grader for a compile no learner's install makes.

    python bench/check.py [--repeat 5] [--lessons lesson2 ...] [--baseline TREE] [--json]
    python bench/check.py --edition DIR [--repeat 5]

--edition DIR times the checks inside a learner edition (`grader release --out DIR`)
instead of this checkout, as a fresh install of it runs: no PYTHON* variable but its
PYTHONPATH, and no editable-install finder, which would otherwise import this
checkout's reference solutions into it. The submissions are this checkout's reference
solutions, copied outside the edition. The baseline runs the same way.

--baseline TREE also times each check on another checkout (a git worktree of an older
commit), alternately with this one's, so before and after saw the same machine.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from side_by_side import checkouts, dated

ROOT = Path(__file__).resolve().parent.parent
# `import grader` first: it keeps jsonschema from loading an IRI parser it does not need
# (2 s), and the baseline should pay for the same imports as the check, no more.
BASELINE = [sys.executable, "-c", "import grader, numpy, yaml, jsonschema"]


def lessons() -> list[str]:
    return sorted(p.stem for p in (ROOT / "rubrics").glob("lesson[1-9].yaml")
                  if (ROOT / "reference" / "solutions" / f"{p.stem}.py").is_file())


# An edition runs as a fresh install of it would (grader.instructor.release.run_in_release).
_UNEDITABLE = "import sys; sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in repr(f).lower()]\n"
EDITION = {"on": False}


def wall(cmd: list[str], cache: str = "off", tree: Path = ROOT) -> float:
    env = {**os.environ, "GRADER_CACHE": cache, "PYTHONPATH": str(tree)}
    if EDITION["on"]:
        env = {k: v for k, v in env.items() if not k.startswith("PYTHON") or k == "PYTHONPATH"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)   # run from bytecode, as an install does
    start = time.perf_counter()
    subprocess.run(cmd, cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=True)
    return time.perf_counter() - start


def check_command(tree: Path, lesson: str) -> list[str]:
    if EDITION["on"]:
        run = f"{_UNEDITABLE}import runpy; sys.argv[0] = 'grader'\nrunpy.run_module('grader.cli', run_name='__main__', alter_sys=True)"
        return [sys.executable, "-c", run, "check", lesson, "--submission", str(EDITION[lesson])]
    return [sys.executable, "-m", "grader.cli", "check", lesson, "--submission",
            str(tree / "reference" / "solutions" / f"{lesson}.py")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--lessons", nargs="+", default=None)
    ap.add_argument("--baseline", type=Path, help="another checkout, timed alternately")
    ap.add_argument("--edition", type=Path, help="a learner edition, timed instead of this checkout")
    args = ap.parse_args()
    trees = checkouts(ROOT, args.baseline)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-check-cache-") as cache:
        if args.edition:
            if args.baseline:
                ap.error("--edition times one tree: leave out --baseline")
            EDITION["on"], trees = True, {"this": args.edition.resolve()}
            BASELINE[1:] = ["-c", _UNEDITABLE + BASELINE[-1]]
            for lesson in args.lessons or lessons():
                EDITION[lesson] = Path(shutil.copy(ROOT / "reference" / "solutions" / f"{lesson}.py", cache))
        for lesson in args.lessons or lessons():
            caches = {name: f"{cache}/{name}" for name in trees}
            for name, tree in trees.items():
                wall(check_command(tree, lesson), caches[name], tree)   # fills the warm cache
            base, cold, warm = [], {n: [] for n in trees}, {n: [] for n in trees}
            for _ in range(args.repeat):          # alternate, so load drifts hit all alike
                base.append(wall(BASELINE))
                for name, tree in trees.items():
                    cold[name].append(wall(check_command(tree, lesson), "off", tree))
                    warm[name].append(wall(check_command(tree, lesson), caches[name], tree))
            b = min(base)
            row = {"lesson": lesson, "baseline_s": b}
            for name in trees:
                row[name] = {"cold_s": min(cold[name]), "warm_s": min(warm[name]),
                             "cold_ratio": min(cold[name]) / b, "warm_ratio": min(warm[name]) / b}
            rows.append(row)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    where = f", in the learner edition {args.edition}" if args.edition else ""
    print(dated(f"wall seconds, best of {args.repeat}, from bytecode{where}"))
    head = f"{'lesson':<8} {'interpreter+imports s':>22} {'cold check s':>13} {'ratio':>6} {'warm check s':>13} {'ratio':>6}"
    if args.baseline:
        head += f" {'before: cold s':>15} {'ratio':>6} {'warm s':>7} {'ratio':>6}"
    print(head + "  target <= 3x warm, <= 4x cold")
    for r in rows:
        t = r["this"]
        line = (f"{r['lesson']:<8} {r['baseline_s']:>22.3f} {t['cold_s']:>13.3f} {t['cold_ratio']:>5.1f}x "
                f"{t['warm_s']:>13.3f} {t['warm_ratio']:>5.1f}x")
        if args.baseline:
            o = r["baseline"]
            line += (f" {o['cold_s']:>15.3f} {o['cold_ratio']:>5.1f}x {o['warm_s']:>7.3f} "
                     f"{o['warm_ratio']:>5.1f}x")
        warm_ok, cold_ok = t["warm_ratio"] <= 3, t["cold_ratio"] <= 4
        verdict = ("meets" if warm_ok and cold_ok else "misses " + " and ".join(
            w for w, ok in (("warm", warm_ok), ("cold", cold_ok)) if not ok))
        print(f"{line}  {verdict}")


if __name__ == "__main__":
    main()

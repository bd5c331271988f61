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
from functools import lru_cache
from pathlib import Path
from typing import Callable

from side_by_side import checkouts, dated

ROOT = Path(__file__).resolve().parent.parent
# `import grader` first: it keeps jsonschema from loading an IRI parser it does not need
# (2 s), and the baseline should pay for the same imports as the check, no more.
BASELINE = [sys.executable, "-c", "import grader, numpy, yaml, jsonschema"]


def solution(tree: Path, lesson: str) -> Path:
    """The reference's submission of ``lesson``: a file, or (lesson 6) a folder of files."""
    file = tree / "reference" / "solutions" / f"{lesson}.py"
    return file if file.is_file() else tree / "reference" / "solutions" / lesson


def lessons() -> list[str]:
    # Every lesson with a rubric and a reference submission: lesson 6's is a folder.
    return sorted(p.stem for p in (ROOT / "rubrics").glob("lesson[1-9].yaml")
                  if solution(ROOT, p.stem).exists())


def wall(cmd: list[str], cache: str = "off", tree: Path = ROOT, env: dict | None = None) -> float:
    """Wall seconds of ``cmd``, in ``env`` (default: this process's) with the cache and tree set."""
    env = {**(os.environ if env is None else env), "GRADER_CACHE": cache, "PYTHONPATH": str(tree)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)   # run from bytecode, as an install does
    start = time.perf_counter()
    subprocess.run(cmd, cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=True)
    return time.perf_counter() - start


def check_command(tree: Path, lesson: str) -> list[str]:
    return [sys.executable, "-m", "grader.cli", "check", lesson, "--submission", str(solution(tree, lesson))]


def edition_commands(edition: Path, folder: str) -> tuple[list[str], dict, Callable]:
    """The baseline, the environment and the check command inside a learner edition, run
    as a fresh install of it runs (grader.instructor.release); the submissions are this
    checkout's reference solutions, copied to ``folder`` (the edition holds none)."""
    from grader.instructor.release import ISOLATED, UNEDITABLE, install_env

    @lru_cache(maxsize=None)
    def command(tree: Path, lesson: str) -> list[str]:
        source = solution(ROOT, lesson)
        submission = (shutil.copy(source, folder) if source.is_file()
                      else shutil.copytree(source, Path(folder) / lesson))
        return [sys.executable, "-c", ISOLATED, "grader.cli", "check", lesson, "--submission", str(submission)]
    return [sys.executable, "-c", UNEDITABLE + BASELINE[-1]], install_env(edition), command


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--lessons", nargs="+", default=None)
    ap.add_argument("--baseline", type=Path, help="another checkout, timed alternately")
    ap.add_argument("--edition", type=Path, help="a learner edition, timed instead of this checkout")
    args = ap.parse_args()
    if args.edition and args.baseline:
        ap.error("--edition times one tree: leave out --baseline")
    trees = {"this": args.edition.resolve()} if args.edition else checkouts(ROOT, args.baseline)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-check-cache-") as cache:
        baseline, env, command = ((BASELINE, None, check_command) if not args.edition
                                  else edition_commands(trees["this"], cache))
        for lesson in args.lessons or lessons():
            caches = {name: f"{cache}/{name}" for name in trees}
            for name, tree in trees.items():
                wall(command(tree, lesson), caches[name], tree, env)   # fills the warm cache
            base, cold, warm = [], {n: [] for n in trees}, {n: [] for n in trees}
            for _ in range(args.repeat):          # alternate, so load drifts hit all alike
                base.append(wall(baseline, tree=trees["this"], env=env))
                for name, tree in trees.items():
                    cold[name].append(wall(command(tree, lesson), "off", tree, env))
                    warm[name].append(wall(command(tree, lesson), caches[name], tree, env))
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

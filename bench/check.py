"""How fast `grader check` answers, against the bare interpreter, side by side.

The target (../shared/spec/grader.md, speed targets): `grader check lessonN` on the
reference solution within 3x of the bare interpreter and import time, about a second
or less. The baseline is measured in the same run: `python -c "import numpy, yaml,
jsonschema"` after `import grader` (an interpreter that loads what the grader's stack
loads, and nothing else), then each
lesson's check, alternating, best of --repeat.

    python bench/check.py [--repeat 5] [--json]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# `import grader` first: it keeps jsonschema from loading an IRI parser it does not need
# (2 s), and the baseline should pay for the same imports as the check, no more.
BASELINE = [sys.executable, "-c", "import grader, numpy, yaml, jsonschema"]


def lessons() -> list[str]:
    return sorted(p.stem for p in (ROOT / "rubrics").glob("lesson[1-9].yaml")
                  if (ROOT / "reference" / "solutions" / f"{p.stem}.py").is_file())


def wall(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = []
    for lesson in lessons():
        check = [sys.executable, "-m", "grader.cli", "check", lesson, "--submission",
                 str(ROOT / "reference" / "solutions" / f"{lesson}.py")]
        base, mine = [], []
        for _ in range(args.repeat):          # alternate, so load drifts hit both alike
            base.append(wall(BASELINE))
            mine.append(wall(check))
        rows.append({"lesson": lesson, "baseline_s": min(base), "check_s": min(mine),
                     "ratio": min(mine) / min(base)})
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'lesson':<8} {'interpreter+imports s':>22} {'grader check s':>15} {'ratio':>7}  target <= 3x")
    for r in rows:
        verdict = "meets" if r["ratio"] <= 3 else "misses"
        print(f"{r['lesson']:<8} {r['baseline_s']:>22.3f} {r['check_s']:>15.3f} {r['ratio']:>6.1f}x  {verdict}")


if __name__ == "__main__":
    main()

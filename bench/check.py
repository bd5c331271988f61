"""How fast `grader check` answers, against the bare interpreter, side by side.

The target: `grader check lessonN` on the
reference solution within 3x of the bare interpreter and import time, about a second
or less. The baseline is measured in the same run: `python -c "import numpy, yaml,
jsonschema"` after `import grader` (an interpreter that loads what the grader's stack
loads, and nothing else), then each lesson's check, alternating, best of --repeat:
cold (GRADER_CACHE=off: public cases and oracle runs computed) and warm (read back
from a cache folder a first check filled, as every check after a learner's first is).

    python bench/check.py [--repeat 5] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# `import grader` first: it keeps jsonschema from loading an IRI parser it does not need
# (2 s), and the baseline should pay for the same imports as the check, no more.
BASELINE = [sys.executable, "-c", "import grader, numpy, yaml, jsonschema"]


def lessons() -> list[str]:
    return sorted(p.stem for p in (ROOT / "rubrics").glob("lesson[1-9].yaml")
                  if (ROOT / "reference" / "solutions" / f"{p.stem}.py").is_file())


def wall(cmd: list[str], cache: str = "off") -> float:
    env = {**os.environ, "GRADER_CACHE": cache}
    start = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=True)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-check-cache-") as cache:
        for lesson in lessons():
            check = [sys.executable, "-m", "grader.cli", "check", lesson, "--submission",
                     str(ROOT / "reference" / "solutions" / f"{lesson}.py")]
            wall(check, cache)                    # fills the cache for the warm runs
            base, cold, warm = [], [], []
            for _ in range(args.repeat):          # alternate, so load drifts hit all alike
                base.append(wall(BASELINE))
                cold.append(wall(check))
                warm.append(wall(check, cache))
            b = min(base)
            rows.append({"lesson": lesson, "baseline_s": b, "cold_s": min(cold), "warm_s": min(warm),
                         "cold_ratio": min(cold) / b, "warm_ratio": min(warm) / b})
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'lesson':<8} {'interpreter+imports s':>22} {'cold check s':>13} {'ratio':>6} "
          f"{'warm check s':>13} {'ratio':>6}  target <= 3x (warm)")
    for r in rows:
        verdict = "meets" if r["warm_ratio"] <= 3 else "misses"
        print(f"{r['lesson']:<8} {r['baseline_s']:>22.3f} {r['cold_s']:>13.3f} {r['cold_ratio']:>5.1f}x "
              f"{r['warm_s']:>13.3f} {r['warm_ratio']:>5.1f}x  {verdict}")


if __name__ == "__main__":
    main()

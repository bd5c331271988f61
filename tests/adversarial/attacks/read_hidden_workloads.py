"""Attack: read the hidden workload families and the code that draws hidden cases, and
peek at the grader's memory."""
import glob
import json
import os

TARGETS = {}  # the test writes the real paths here


def read(path, n=80):
    try:
        with open(path, "rb") as f:
            return "ok:" + f.read(n).decode("latin-1")
    except BaseException as exc:
        return type(exc).__name__


root = TARGETS.get("course_root", "/nonexistent")
found = {p: read(p) for p in TARGETS.get("hidden", [])}
found.update({p: read(p) for p in glob.glob(os.path.join(root, "grader", "instructor", "families", "*.yaml"))})
pid = TARGETS.get("grader_pid", 1)
found["maps"] = read("/proc/%d/maps" % pid)
found["mem"] = read("/proc/%d/mem" % pid)
try:
    found["ls"] = sorted(os.listdir("/"))
except BaseException as exc:
    found["ls"] = type(exc).__name__
raise RuntimeError("LEAK " + json.dumps(sorted(found.items(), key=lambda kv: "ok" not in str(kv[1]))))

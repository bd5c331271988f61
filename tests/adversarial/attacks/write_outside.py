"""Attack: write files outside the sandbox: into the course, over the grader's code
caches, into the host's /tmp, /dev/shm and home, next to the gradebook. Only NEW files
with unique names, so a failure of the sandbox never damages the checkout."""
import json
import os

TARGETS = {}  # the test writes the real paths here

found = {}
for path in TARGETS.get("write", []):
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write("escaped")
        found[path] = "ok:written"
    except BaseException as exc:
        found[path] = type(exc).__name__
try:                                          # fill the sandbox's own disk
    with open("fill", "wb") as f:
        for _ in range(1 << 12):
            f.write(b"x" * (1 << 20))
except BaseException as exc:
    found["fill"] = type(exc).__name__
raise RuntimeError("LEAK " + json.dumps(sorted(found.items(), key=lambda kv: "ok" not in str(kv[1]))))

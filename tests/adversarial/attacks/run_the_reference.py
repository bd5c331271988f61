"""Attack: find the course through the grader's /proc entries (its working directory,
its root) or the path the test gives it, and run the reference solution as its own
answers: full marks, if the sandbox lets it read the course."""
import json
import os

TARGETS = {}  # the test writes the real paths here

found = {}
candidates = [f"/proc/{os.getppid()}/cwd/reference/solutions/lesson1.py",
              f"/proc/{TARGETS.get('grader_pid', 1)}/cwd/reference/solutions/lesson1.py",
              f"/proc/{TARGETS.get('grader_pid', 1)}/root{TARGETS.get('reference', '/nonexistent')}",
              TARGETS.get("reference", "/nonexistent")]
for path in candidates:
    try:
        with open(path) as f:
            source = f.read()
        exec(compile(source, "stolen.py", "exec"), globals())
        found[path] = "ok:stolen"
        break
    except BaseException as exc:
        found[path] = type(exc).__name__
for path in ("/etc/shadow", f"/proc/{TARGETS.get('grader_pid', 1)}/mem",
             f"/proc/{TARGETS.get('grader_pid', 1)}/environ"):
    try:
        with open(path, "rb") as f:
            found[path] = "ok:" + f.read(40).decode("latin-1")
    except BaseException as exc:
        found[path] = type(exc).__name__
if not any("ok" in v for v in found.values()):
    raise RuntimeError("LEAK " + json.dumps(sorted(found.items())))

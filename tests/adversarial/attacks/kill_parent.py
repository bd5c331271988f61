"""Attack: kill the grader: the parent, its process group, pid 1, everything (-1), and
the grader's pid the test hands it."""
import json
import os
import signal

TARGETS = {}  # the test writes the real paths here

found = {}
for name, pid in (("parent", os.getppid()), ("grader", TARGETS.get("grader_pid", 1)),
                  ("init", 1), ("everyone", -1)):
    try:
        os.kill(pid, signal.SIGKILL)
        found[name] = "ok:sent"
    except BaseException as exc:
        found[name] = type(exc).__name__
for name, act in (("group", lambda: os.killpg(os.getpgid(os.getppid()), signal.SIGKILL)),
                  ("stop", lambda: os.kill(os.getppid(), signal.SIGSTOP))):
    try:
        act()
        found[name] = "ok:sent"
    except BaseException as exc:
        found[name] = type(exc).__name__
raise RuntimeError("LEAK " + json.dumps(sorted(found.items(), key=lambda kv: "ok" not in str(kv[1]))))

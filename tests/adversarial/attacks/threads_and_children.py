"""Attack: leave threads and child processes running after the grader is done with it."""
import _thread
import json
import os
import subprocess
import sys
import threading
import time

found = {}


def linger():
    while True:
        time.sleep(0.01)


def forked_orphan():
    if os.fork() == 0:                      # the child: its own session, lingering forever
        os.setsid()
        linger()


for name, start in (("thread", lambda: threading.Thread(target=linger).start()),
                    ("raw_thread", lambda: _thread.start_new_thread(linger, ())),
                    ("fork", forked_orphan),
                    ("sleeper", lambda: subprocess.Popen(["/bin/sleep", "1000"], start_new_session=True)),
                    ("python", lambda: subprocess.Popen([sys.executable, "-c", "while True: pass"]))):
    try:
        start()
        found[name] = "ok:started"
    except BaseException as exc:
        found[name] = type(exc).__name__
raise RuntimeError("LEAK " + json.dumps(sorted(found.items(), key=lambda kv: "ok" not in str(kv[1]))))

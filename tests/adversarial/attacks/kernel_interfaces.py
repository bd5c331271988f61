"""Attack: open the kernel interfaces an allow list must leave out, raw through ctypes:
io_uring (its ring runs opens, reads and socket calls the filter never sees), bpf,
perf_event_open, userfaultfd, memfd_create (an anonymous file to run), a new user
namespace (capabilities again, to mount), a session of its own (setsid, setpgid: out of
the process group the grader kills), timers that fire after the call returned
(setitimer, timer_create, alarm), a thread (clone3) and a new personality. The child
then runs as it was, every one refused."""
import ctypes
import json
import os

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
ARM = os.uname().machine in ("aarch64", "arm64")
NR = {"io_uring_setup": (425, 425), "bpf": (321, 280), "perf_event_open": (298, 241),
      "userfaultfd": (323, 282), "memfd_create": (319, 279), "unshare": (272, 97),
      "setsid": (112, 157), "setpgid": (109, 154), "setitimer": (38, 103),
      "timer_create": (222, 107), "alarm": (37, None), "clone3": (435, 435),
      "personality": (135, 92)}
params = (ctypes.c_uint32 * 30)()                # io_uring_params, zeroed
perf_attr = (ctypes.c_uint32 * 32)(0, 128)       # PERF_TYPE_HARDWARE, size 128: cycles
interval = (ctypes.c_long * 4)(0, 0, 0, 1000)    # ITIMER_REAL in 1 ms
clone_args = (ctypes.c_uint64 * 11)()            # no flags: a fork, by another name
calls = {
    "io_uring_setup": (ctypes.c_uint(8), ctypes.byref(params)),
    "bpf": (ctypes.c_int(0), None, ctypes.c_uint(0)),                     # BPF_MAP_CREATE
    "perf_event_open": (ctypes.byref(perf_attr), ctypes.c_int(0), ctypes.c_int(-1),
                        ctypes.c_int(-1), ctypes.c_ulong(0)),
    "userfaultfd": (ctypes.c_int(0),),
    "memfd_create": (b"payload", ctypes.c_uint(0)),
    "unshare": (ctypes.c_int(0x10000000 | 0x20000),),                     # NEWUSER | NEWNS
    "setsid": (),
    "setpgid": (ctypes.c_int(0), ctypes.c_int(0)),
    "setitimer": (ctypes.c_int(0), ctypes.byref(interval), None),
    "timer_create": (ctypes.c_int(0), None, ctypes.byref(ctypes.c_int())),   # CLOCK_REALTIME
    "alarm": (ctypes.c_uint(1),),
    "clone3": (ctypes.byref(clone_args), ctypes.c_size_t(88)),
    "personality": (ctypes.c_ulong(0x0040000),),                          # ADDR_NO_RANDOMIZE
}
found = {}
for name, args in calls.items():
    number = NR[name][1 if ARM else 0]
    if number is None:
        continue
    result = libc.syscall(ctypes.c_long(number), *args)
    if result == 0 and name == "clone3":      # the new process: gone at once
        os._exit(0)
    found[name] = "ok:%d" % result if result >= 0 else os.strerror(ctypes.get_errno())
raise RuntimeError("LEAK " + json.dumps(sorted(found.items(), key=lambda kv: "ok" not in kv[1])))

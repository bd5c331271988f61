"""Attack: leave a mark a later or concurrent child can read: another student's child in a
class graded with --jobs 2, or this submission's public-case child in the next grade, which
would put it into feedback handed back early. Every way a child that may only read the
standard library could still change something another child sees: the access time of a
standard library file (stamped by relatime at its first read in a day), a shared futex on
a mapped os.py (FUTEX_WAKE counts the waiters of every process), record and flock locks,
a key in the uid's keyring, SysV IPC under a fixed key, a POSIX shared memory file, a bound
abstract socket."""
import ctypes
import fcntl
import json
import os
import struct
import time

TARGETS = {}  # the test writes the real paths here

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                      ctypes.c_int, ctypes.c_long]
ARM = os.uname().machine in ("aarch64", "arm64")
NR = {"futex": 98 if ARM else 202, "add_key": 217 if ARM else 248,
      "msgget": 186 if ARM else 68, "shmget": 194 if ARM else 29}
KEY = 0x5EC12E7                       # a fixed SysV key both children would agree on
found = {}


def said(result):
    return "ok:%d" % result if result >= 0 else os.strerror(ctypes.get_errno())


def unread():
    """A standard library file a read would stamp: its access time not after its last
    change (as on a fresh install), or a day old."""
    day_ago = time.time_ns() - 24 * 3600 * 10 ** 9
    for root, _, names in os.walk(os.path.dirname(os.__file__)):
        for name in names:
            st = os.stat(os.path.join(root, name))
            if st.st_atime_ns <= max(st.st_mtime_ns, st.st_ctime_ns) or st.st_atime_ns < day_ago:
                return os.path.join(root, name)
    return os.__file__


def access_time():
    path = unread()
    before = os.stat(path).st_atime_ns
    with open(path, "rb") as f:
        f.read(1)
    return "ok:stamped" if os.stat(path).st_atime_ns != before else "unchanged"


def futex_wake():
    word = libc.mmap(None, 4096, 1, 1, os.open(os.__file__, os.O_RDONLY), 0)   # MAP_SHARED
    return said(libc.syscall(ctypes.c_long(NR["futex"]), ctypes.c_void_p(word), ctypes.c_int(1),
                             ctypes.c_int(1), None, None, ctypes.c_int(0)))     # FUTEX_WAKE


def record_lock():
    fd = os.open(os.__file__, os.O_RDONLY)
    fcntl.fcntl(fd, fcntl.F_SETLK, struct.pack("hhqqi", fcntl.F_RDLCK, 0, 7, 1, 0))
    return "ok:locked"


def flock():
    fcntl.flock(os.open(os.__file__, os.O_RDONLY), fcntl.LOCK_SH | fcntl.LOCK_NB)
    return "ok:locked"


def keyring():
    return said(libc.syscall(ctypes.c_long(NR["add_key"]), b"user", b"grader-mark", b"1",
                             ctypes.c_size_t(1), ctypes.c_int(-4)))     # KEY_SPEC_USER_KEYRING


def sysv():
    return said(libc.syscall(ctypes.c_long(NR["msgget"]), ctypes.c_int(KEY), ctypes.c_int(0o1666)))


def sysv_shm():
    return said(libc.syscall(ctypes.c_long(NR["shmget"]), ctypes.c_int(KEY), ctypes.c_size_t(4096),
                             ctypes.c_int(0o1666)))


def posix_shm():
    shm = [p for p in TARGETS.get("write", []) if p.startswith("/dev/shm/")]
    os.close(os.open((shm or ["/dev/shm/grader-mark"])[0], os.O_CREAT | os.O_RDWR, 0o666))
    return "ok:created"


def abstract_socket():
    import socket
    socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).bind("\0grader-mark")
    return "ok:bound"


for name, attempt in (("atime", access_time), ("futex", futex_wake), ("lock", record_lock),
                      ("flock", flock), ("keyring", keyring), ("msgget", sysv),
                      ("shmget", sysv_shm), ("shm", posix_shm), ("abstract", abstract_socket)):
    try:
        found[name] = attempt()
    except BaseException as exc:
        found[name] = type(exc).__name__
raise RuntimeError("LEAK " + json.dumps(sorted(found.items(), key=lambda kv: "ok" not in kv[1])))

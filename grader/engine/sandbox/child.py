"""The child process that runs a learner's submission. Standard library only.

Started by grader.engine.sandbox.session as ``python -P -s -S child.py READ_FD WRITE_FD``
(from this file's bytecode when it is current: session.child_program; under bwrap and
setpriv when grader.engine.sandbox.isolation can): no site-packages, no
environment but PATH, LANG and a fixed PYTHONHASHSEED, no script directory on sys.path, so
nothing of the grader is importable. Everything it learns arrives on READ_FD; everything
it says leaves on WRITE_FD. A frame is a 4-byte big-endian length and that many bytes of
UTF-8 JSON.

Conversation:
  parent -> {"shapes_source", "submission", "filename", "workdir", "limits",
             "require_confinement": bool, "cells": [[first line, cell number], ...],
             "start": int}
            ("cells": a notebook's, for feedback's line numbers; absent for a .py file;
            "start": which child of its Sandbox this is, 0 for the first: another_process)
  child  -> {"isolation": [...], "lacks": "..."}   after hardening, before any learner code
            runs ("lacks": what confinement is missing, "" when none); or, when confinement
            was required and is missing, {"isolation": [...], "refused": "..."} and it exits
            without loading the submission
  child  -> {"loaded": true} | {"loaded": false, "error": "..."}
  parent -> {"calls": [[fname, [args...]], ...]}   a shapes dataclass argument is
            {"__type__": name, "__fields__": [values in field order]} (or its fields by name)
  child  -> one frame per call, in order: {"ok": v} | {"raised": s} | {"missing": s} | {"bad": s}
            (+ "stdout" when the call printed)
One frame per call rather than one per batch: when a call hangs, the parent knows exactly
which one it was and keeps every answer before it.

Nothing here is trusted by the parent: learner code shares this process and can rewrite
any of it. These checks exist to give honest submissions precise feedback; the parent
re-validates every byte.
"""
import builtins
import collections.abc
import dataclasses
import io
import json
import operator
import os
import sys
import types

MAX_DEPTH = 20             # the shapes nest three deep; deeper is a runaway structure
DETAIL_CHARS = 300         # one feedback line


# ----------------------------------------------------------------------------- frames

def read_exact(fd, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return buf


def read_frame(fd):
    n = int.from_bytes(read_exact(fd, 4), "big")
    return json.loads(read_exact(fd, n))


class FrameReader:
    """Frames from fd, read as they come: one read() usually holds a whole request (its
    length and its JSON), where reading the length, then the body, took two."""

    def __init__(self, fd):
        self.fd, self.buf = fd, bytearray()

    def __call__(self):
        buf = self.buf
        while len(buf) < 4:
            self._more()
        end = 4 + int.from_bytes(buf[:4], "big")
        while len(buf) < end:
            self._more()
        body = buf[4:end]
        del buf[:end]
        return json.loads(body)

    def _more(self):
        chunk = os.read(self.fd, 1 << 16)
        if not chunk:
            raise EOFError
        self.buf += chunk


def compact_encoder():
    """obj -> json.dumps(obj, separators=(",", ":")), with the encoder built once rather than
    at every answer. No circular-reference check: encode() builds a tree, depth-bounded."""
    plain = json.JSONEncoder(separators=(",", ":"))
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return plain.encode
    encoder = make(None, plain.default, json.encoder.encode_basestring_ascii, None, ":", ",",
                   False, False, True)
    return lambda obj: "".join(encoder(obj, 0))


def write_frame(fd, obj):
    data = json.dumps(obj, separators=(",", ":")).encode()
    data = len(data).to_bytes(4, "big") + data
    while data:
        data = data[os.write(fd, data):]


# ----------------------------------------------------------------------------- hardening
#
# The order matters, and each step needs the one before it:
#   1. as root: a private network namespace, a private mount namespace whose every mount
#      is read-only but the working directory's tmpfs, then the bounding set emptied (all
#      need capabilities the next step gives up);
#   2. as root: a uid of its own (65534). When that user cannot read the interpreter's
#      files (pyenv under a 0700 /root), the file-system uid stays 0 so that `import math`
#      still works; every capability goes all the same, and step 4 decides what files can
#      be reached at all, whoever owns them;
#   3. PR_SET_NO_NEW_PRIVS (Landlock and seccomp need it without CAP_SYS_ADMIN);
#   4. Landlock: reading is allowed only under the interpreter's sys.path and the system's
#      shared-library folders, writing only in the working directory;
#   5. rlimits, then seccomp, last: an ALLOW list of the system calls an interpreter that
#      computes needs; everything else (sockets, fork, exec, kill, ptrace, mount,
#      chmod/chown, xattrs, prlimit64 on another process, ...) fails with EPERM.
# Learner code runs only after all of it, and the report says which steps took.

CLONE_NEWNET = 0x40000000
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_KEEPCAPS = 1, 4, 8
PR_CAPBSET_READ, PR_CAPBSET_DROP, PR_SET_SECCOMP, PR_SET_NO_NEW_PRIVS = 23, 24, 22, 38
PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, PR_CAP_AMBIENT_CLEAR_ALL = 47, 1, 4
CAP_SETGID, CAP_SETUID = 6, 7


def harden(workdir, limits):
    """Apply every restriction we can before learner code runs. Returns (what took, what
    is missing for confinement: '' when the child is confined)."""
    applied = []
    os.chdir(workdir)
    os.umask(0o077)
    libc = load_libc()
    started_root = hasattr(os, "geteuid") and os.geteuid() == 0
    if started_root and libc is not None and libc.unshare(CLONE_NEWNET) == 0:
        # Only root may make a network namespace without a user namespace (which the spec
        # rules out); inside it there is nothing but a loopback that is down.
        applied.append("private network namespace")
    capped = True
    if limits.get("tmp"):                   # the fallback (under bwrap /tmp is one already)
        if started_root and libc:
            said = private_tmpfs(libc, workdir, limits["tmp"])
        elif libc and own_user_namespace(libc):
            # Not root: the mount namespace is its user namespace's, and so are the
            # capabilities it holds there, which go before anything else runs.
            said = private_tmpfs(libc, workdir, limits["tmp"])
            applied.append("user namespace of its own")
            drop_capabilities(libc)
        else:
            said = "working directory not size-capped (not root)"
        # Where nothing caps its size, the working directory is read-only (Landlock, below):
        # a host folder would take file after file until the time budget ended.
        capped = said.startswith("tmpfs")
        applied.append(said + ("" if capped else ": read-only"))
    if started_root:
        applied.append(drop_uid(libc, workdir))
    if libc is not None:
        # PR_SET_PDEATHSIG SIGKILL (after the uid drop, which clears it): a grader killed
        # with -9 must not leave a looping submission spinning until its CPU limit.
        libc.prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0)
        libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)        # no ptrace, no /proc/pid/mem
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0:
            applied.append("no_new_privs")
    uid = os.getuid() if hasattr(os, "getuid") else None
    capless = libc is not None and no_capabilities(libc)
    if not started_root and uid is not None:
        # Started unprivileged (by setpriv under bwrap, or by a non-root grader).
        applied.append("uid %d%s" % (uid, " with no capabilities" if capless else ""))
    landlock = install_landlock(libc, workdir, writable=capped) if libc is not None else ""
    if landlock:
        applied.append(landlock)
    applied.append(apply_rlimits(limits))
    filtered = install_seccomp(libc) if libc is not None else ""
    if filtered:
        applied.append(filtered)
    lacks = []
    if not landlock:
        lacks.append("Landlock (file access is not confined)")
    if not filtered:
        lacks.append("a seccomp allow list")
    if not capless or uid == 0 or (hasattr(os, "geteuid") and os.geteuid() == 0):
        lacks.append("a uid without capabilities")
    return applied, "; ".join(lacks)


MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 2, 4, 8, 1 << 14, 1 << 18
CLONE_NEWNS = 0x00020000


def private_tmpfs(libc, workdir, size):
    """As root: the working directory becomes a tmpfs of `size` bytes in a mount namespace
    of this process's own, as bwrap's /tmp is. Without it a child writes files of up to
    its file-size limit, as many as it likes, into the host's /tmp (hundreds of MB a
    second). Returns what took, in words."""
    try:
        if libc.unshare(CLONE_NEWNS) != 0:
            raise OSError(0, "unshare")
        # Private first: the tmpfs must not propagate to the host's mount namespace.
        if libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0:
            raise OSError(0, "make-private")
        frozen = read_only_tree(libc)
        options = ("size=%d,mode=0700" % int(size)).encode()
        if libc.mount(b"tmpfs", workdir.encode(), b"tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                      options) != 0:
            raise OSError(0, "mount")
        os.chdir(workdir)                      # the tmpfs, not the host folder under it
    except OSError as exc:
        return "working directory not size-capped (%s failed)" % exc.strerror
    return "tmpfs working directory %d MiB%s" % (
        int(size) >> 20, ", every other mount read-only" if frozen else "")


MOUNT_SETATTR, AT_FDCWD, AT_RECURSIVE, MOUNT_ATTR_RDONLY = 442, -100, 0x8000, 1


def read_only_tree(libc):
    """Every mount of this (private) namespace read-only, before the working directory's
    tmpfs is mounted: what a child reads then leaves no access time behind. On the host's
    read-write mounts, relatime stamped a standard library file's access time at its first
    read in a day, and any later child saw it with stat(): a hidden-case child that read
    the files of its choice (a bit of a hidden input each) told the public-case child of
    the next grade, or another student's, which could put it into feedback handed back
    early. bwrap's binds are read-only already. True when it took (Linux 5.12+)."""
    import ctypes

    class MountAttr(ctypes.Structure):
        _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                    ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]

    try:
        libc.syscall.restype = ctypes.c_long
        attr = MountAttr(MOUNT_ATTR_RDONLY, 0, 0, 0)
        return libc.syscall(ctypes.c_long(MOUNT_SETATTR), ctypes.c_int(AT_FDCWD), b"/",
                            ctypes.c_uint(AT_RECURSIVE), ctypes.byref(attr),
                            ctypes.c_size_t(ctypes.sizeof(attr))) == 0
    except Exception:
        return False


CLONE_NEWUSER = 0x10000000


def own_user_namespace(libc):
    """Not root: enter a user namespace of its own, its uid and gid mapped to themselves,
    so that it may make the mount namespace of private_tmpfs (a capped working directory,
    every other mount read-only) as root's child does. Every capability it holds in it
    must then go (drop_capabilities). False where the kernel refuses (unprivileged user
    namespaces turned off): the working directory is then read-only instead."""
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(CLONE_NEWUSER) != 0:
        return False
    try:
        for name, text in (("setgroups", "deny"), ("uid_map", "%d %d 1" % (uid, uid)),
                           ("gid_map", "%d %d 1" % (gid, gid))):
            with open("/proc/self/" + name, "w") as f:
                f.write(text)
    except OSError:
        pass        # unmapped, it reads as the overflow uid; the kernel checks the real one
    return True


def drop_capabilities(libc):
    """Every capability gone: nothing to regain, then the effective and permitted sets."""
    drop_bounding_set(libc)
    return capset(libc, 0)


def drop_bounding_set(libc):
    """The bounding set emptied (nothing to regain) and the ambient set cleared."""
    for cap in range(64):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            break
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)


def load_libc():
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes
        return ctypes.CDLL(None, use_errno=True)
    except Exception:
        return None


def capset(libc, caps):
    """Set the effective and permitted capability sets of this thread to `caps` (bits)."""
    import ctypes
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)          # _LINUX_CAPABILITY_VERSION_3, self
    low, high = caps & 0xFFFFFFFF, caps >> 32
    data = (ctypes.c_uint32 * 6)(low, low, 0, high, high, 0)
    return libc.capset(header, data) == 0


def no_capabilities(libc):
    """True when this process holds no capability in any set, bounding set included."""
    try:
        import ctypes
        header = (ctypes.c_uint32 * 2)(0x20080522, 0)      # _LINUX_CAPABILITY_VERSION_3, self
        data = (ctypes.c_uint32 * 6)()                     # 2 x (effective, permitted, inheritable)
        if libc.capget(header, data) != 0 or any(data):
            return False
        for cap in range(64):
            held = libc.prctl(PR_CAPBSET_READ, cap, 0, 0, 0)
            if held < 0:                                   # past the last capability
                break
            if held or libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, cap, 0, 0) == 1:
                return False
        return True
    except Exception:
        return False


def drop_uid(libc, workdir):
    """Become uid/gid 65534 with no capabilities: not the grader's user, so signals,
    prlimit and /proc ownership checks fail against the grader. When 65534 cannot read the
    interpreter's own files (every later `import` would fail and honest code would be
    graded as broken), the file-system uid stays 0: which files it can then open is
    Landlock's decision, not ownership's."""
    uid = gid = 65534
    blocker = None
    for path in sys.path:
        blocker = blocker or (os.path.isdir(path) and closed_to_others(path))
    try:
        if libc is None:
            raise OSError(0, "no libc")
        drop_bounding_set(libc)
        if blocker:
            libc.prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0)
        else:
            os.chown(workdir, uid, gid)
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
        if blocker:
            # Kept across setresuid by KEEPCAPS: just enough to set the file-system uid.
            if not capset(libc, 1 << CAP_SETUID) or libc.setfsuid(0) < 0:
                raise OSError(0, "setfsuid failed")
            libc.prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0)
        if not capset(libc, 0) or os.getuid() != uid:
            raise OSError(0, "capabilities could not be dropped")
    except OSError as exc:
        return "still root (uid drop failed: %s)" % (exc.strerror or exc)
    if blocker:
        return "uid %d with no capabilities (file access as uid 0: %s is closed to uid %d)" % (
            uid, blocker, uid)
    return "uid %d with no capabilities" % uid


def closed_to_others(path):
    """The first directory on the way to `path` that other users cannot enter, or None."""
    import stat
    if os.stat(path).st_mode & stat.S_IROTH == 0:
        return path
    while True:
        if os.stat(path).st_mode & stat.S_IXOTH == 0:
            return path
        if path == os.path.dirname(path):
            return None
        path = os.path.dirname(path)


# Landlock (kernel 5.13+). Access rights by the ABI version that introduced them.
LL_EXECUTE, LL_WRITE_FILE, LL_READ_FILE, LL_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
LL_REMOVE_DIR, LL_REMOVE_FILE, LL_MAKE_DIR, LL_MAKE_REG = 1 << 4, 1 << 5, 1 << 7, 1 << 8
LL_FS_V1 = (1 << 13) - 1                # EXECUTE .. MAKE_SYM
LL_REFER, LL_TRUNCATE, LL_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
LL_NET_BIND_TCP, LL_NET_CONNECT_TCP = 1, 2
LL_SCOPE_ABSTRACT_UNIX_SOCKET, LL_SCOPE_SIGNAL = 1, 2
SYS_LANDLOCK_CREATE_RULESET, SYS_LANDLOCK_ADD_RULE, SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446
LIBRARY_DIRS = ("/lib", "/lib64", "/usr/lib", "/usr/lib64", "/usr/local/lib")


def landlock_abi(libc):
    """The kernel's Landlock ABI version, 0 when it has none (or it is disabled)."""
    import ctypes
    libc.syscall.restype = ctypes.c_long
    version = libc.syscall(ctypes.c_long(SYS_LANDLOCK_CREATE_RULESET), None, ctypes.c_size_t(0),
                           ctypes.c_uint32(1))            # LANDLOCK_CREATE_RULESET_VERSION
    return max(0, version)


def install_landlock(libc, workdir, writable=True):
    """Confine file access: read under sys.path and the library folders, read (and write,
    when `writable`) in `workdir`, nothing anywhere else (the course, the secret, the
    gradebook, /proc, /dev). Returns a description, or '' if the kernel has no Landlock."""
    try:
        import ctypes
        abi = landlock_abi(libc) if platform_arch() else 0
        if abi < 1:
            return ""
        fs = LL_FS_V1 | (LL_REFER if abi >= 2 else 0) | (LL_TRUNCATE if abi >= 3 else 0) \
            | (LL_IOCTL_DEV if abi >= 5 else 0)
        net = (LL_NET_BIND_TCP | LL_NET_CONNECT_TCP) if abi >= 4 else 0
        scoped = (LL_SCOPE_ABSTRACT_UNIX_SOCKET | LL_SCOPE_SIGNAL) if abi >= 6 else 0

        class RulesetAttr(ctypes.Structure):
            _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]

        class PathBeneath(ctypes.Structure):
            _pack_ = 1
            _fields_ = [("allowed", ctypes.c_uint64), ("fd", ctypes.c_int32)]

        attr = RulesetAttr(fs, net, scoped)
        size = 24 if abi >= 6 else 16 if abi >= 4 else 8
        ruleset = libc.syscall(ctypes.c_long(SYS_LANDLOCK_CREATE_RULESET), ctypes.byref(attr),
                               ctypes.c_size_t(size), ctypes.c_uint32(0))
        if ruleset < 0:
            return ""
        try:
            read_dir = LL_READ_FILE | LL_READ_DIR
            write_dir = read_dir | LL_WRITE_FILE | LL_REMOVE_DIR | LL_REMOVE_FILE | LL_MAKE_DIR \
                | LL_MAKE_REG | (LL_TRUNCATE if abi >= 3 else 0)
            roots = [*sys.path, *LIBRARY_DIRS]
            hidden = installed_packages(roots)
            rules = [rule for p in roots for rule in readable_beneath(p, hidden, read_dir)]
            rules.append((workdir, write_dir if writable else read_dir))
            for path, allowed in rules:
                try:
                    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
                except OSError:
                    continue                               # absent here: nothing to allow
                try:
                    if not os.path.isdir(path):
                        allowed &= LL_READ_FILE | LL_WRITE_FILE | LL_TRUNCATE   # a file (a zip)
                    rule = PathBeneath(allowed, fd)
                    if libc.syscall(ctypes.c_long(SYS_LANDLOCK_ADD_RULE), ctypes.c_int(ruleset),
                                    ctypes.c_int(1), ctypes.byref(rule), ctypes.c_uint32(0)) != 0:
                        return ""                          # LANDLOCK_RULE_PATH_BENEATH refused
                finally:
                    os.close(fd)
            if libc.syscall(ctypes.c_long(SYS_LANDLOCK_RESTRICT_SELF), ctypes.c_int(ruleset),
                            ctypes.c_uint32(0)) != 0:
                return ""
        finally:
            os.close(ruleset)
        return "landlock(ABI %d: reads only the interpreter and system libraries, writes %s%s)" % (
            abi, "only its working directory" if writable else "nothing", ", no signals out" if scoped else "")
    except Exception:
        return ""


PACKAGE_DIRS = ("site-packages", "dist-packages")


def installed_packages(roots):
    """The installed-packages folders inside the readable roots (the interpreter's own
    lib/python3.X/site-packages, /usr/lib/python3/dist-packages, /usr/local/lib/python3.X/...):
    a course installed without -e, the grader and its gradebook driver may be in them, and
    a submission imports the standard library and reference.shapes only, as under bwrap."""
    import glob
    found = set()
    for root in roots:
        for name in PACKAGE_DIRS:
            for pattern in (name, os.path.join("python3*", name)):
                found.update(os.path.realpath(p) for p in glob.glob(os.path.join(root, pattern)))
    # An empty one hides nothing: under bwrap each is an empty read-only tmpfs already, and
    # walking around it would cost every start a rule per entry of the standard library.
    return {p for p in found if _holds_something(p)}


def _holds_something(folder):
    try:
        with os.scandir(folder) as entries:
            return next(entries, None) is not None
    except OSError:
        return False           # unreadable: no rule reaches into it either


def readable_beneath(root, hidden, allowed):
    """Landlock rules that let `root` be read except for the `hidden` folders beneath it.
    Landlock only allows, so a folder on the way to a hidden one is allowed its listing
    alone (the import system lists each sys.path folder) and each of its other entries in
    full. A right holds beneath its folder, so the hidden folders' names can still be
    listed; none of their files can be opened. Symbolic links are not followed: a rule on
    one would allow its target, and what one leads to is reachable under its own rule or
    not at all."""
    real = os.path.realpath(root)
    if real in hidden:
        return []
    if not any(h.startswith(real.rstrip("/") + "/") for h in hidden) or not os.path.isdir(real):
        return [(real, allowed)]
    rules = [(real, LL_READ_DIR)]
    try:
        names = os.listdir(real)
    except OSError:
        return rules
    for name in names:
        path = os.path.join(real, name)
        if not os.path.islink(path):
            rules += readable_beneath(path, hidden, allowed)
    return rules


# seccomp: the system calls a computing interpreter needs, by number on each architecture
# (x86_64, aarch64; None: the architecture has no such call). Numbers from the kernels'
# tables; tests/test_sandbox.py checks them against libseccomp where it is installed.
# Not sysinfo: the machine's free memory let a hidden-case child that held 700 MB, or
# none, signal a bit of a hidden input to the public-case child, whose answers and
# exceptions go into feedback handed back before grades are published.
ALLOWED_SYSCALLS = {
    "read": (0, 63), "write": (1, 64), "readv": (19, 65), "writev": (20, 66),
    "pread64": (17, 67), "pwrite64": (18, 68), "close": (3, 57), "close_range": (436, 436),
    "fstat": (5, 80), "newfstatat": (262, 79), "stat": (4, None), "lstat": (6, None),
    "statx": (332, 291), "lseek": (8, 62), "mmap": (9, 222), "munmap": (11, 215),
    "mremap": (25, 216), "mprotect": (10, 226), "madvise": (28, 233), "brk": (12, 214),
    "rt_sigaction": (13, 134), "rt_sigprocmask": (14, 135), "rt_sigreturn": (15, 139),
    "sigaltstack": (131, 132), "dup": (32, 23), "dup2": (33, None),
    "dup3": (292, 24), "openat": (257, 56), "open": (2, None), "access": (21, None),
    "faccessat": (269, 48), "faccessat2": (439, 439), "getdents64": (217, 61),
    "getcwd": (79, 17), "readlink": (89, None), "readlinkat": (267, 78),
    "unlinkat": (263, 35), "unlink": (87, None), "mkdirat": (258, 34), "mkdir": (83, None),
    "rmdir": (84, None), "ftruncate": (77, 46), "fsync": (74, 82), "fdatasync": (75, 83),
    "set_robust_list": (273, 99), "rseq": (334, 293),
    "sched_yield": (24, 124), "sched_getaffinity": (204, 123), "getpid": (39, 172),
    "gettid": (186, 178), "getppid": (110, 173), "getuid": (102, 174), "geteuid": (107, 175),
    "getgid": (104, 176), "getegid": (108, 177), "getresuid": (118, 148),
    "getresgid": (120, 150), "getgroups": (115, 158), "uname": (63, 160),
    "getrusage": (98, 165), "times": (100, 153),
    "clock_gettime": (228, 113), "clock_getres": (229, 114), "clock_nanosleep": (230, 115),
    "nanosleep": (35, 101), "gettimeofday": (96, 169), "time": (201, None),
    "getrandom": (318, 278), "exit": (60, 93), "exit_group": (231, 94),
    "getrlimit": (97, 163), "poll": (7, None), "ppoll": (271, 73), "select": (23, None),
    "pselect6": (270, 72), "umask": (95, 166), "restart_syscall": (219, 128),
    "fadvise64": (221, 223),
}
# Allowed only with these arguments: (byte offset of a 32-bit word in seccomp_data, value).
PRLIMIT64 = (302, 261)          # pid 0 only (this process): libc's getrlimit/setrlimit
IOCTL = (16, 29)                # TCGETS only: isatty() on the child's own descriptors
# fcntl with the commands an interpreter uses on its own descriptors only: duplicate them,
# their flags (F_DUPFD, F_GETFD, F_SETFD, F_GETFL, F_SETFL, F_DUPFD_CLOEXEC). Not
# F_SETOWN, F_SETSIG, F_SETOWN_EX: with O_ASYNC on its pipes, a child whose uid is the
# grader's (a grader that is not root) had the kernel send the grader SIGKILL on its next
# read, where Landlock does not scope signals (before ABI 6, Linux 6.12). Not the record
# locks (F_GETLK, F_SETLK, the OFD ones): read locks on bytes of a standard library file,
# which every child may open, were a message one child left and another read.
FCNTL = (72, 25)
FCNTL_ALLOWED = (0, 1, 2, 3, 4, 1030)
# futex with FUTEX_PRIVATE_FLAG only: a process's own locks. A shared futex's key is the
# file and offset of a shared mapping, and every child may map the standard library: one
# child waiting on a word of os.py was woken, and counted, by another (FUTEX_WAKE returns
# how many it woke), across mount and pid namespaces: a live message between two
# students' children in a class graded with --jobs 2, under bwrap too.
FUTEX = (202, 98)
FUTEX_PRIVATE_FLAG = 128
GUARDED = (PRLIMIT64, IOCTL, FCNTL, FUTEX)   # allowed with some arguments only (seccomp_program)
TCGETS = 0x5401
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
X32_SYSCALL_BIT = 0x40000000


def platform_arch():
    machine = os.uname().machine
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine) if machine else ""


def seccomp_program(arch):
    """The classic-BPF filter for `arch`, as (code, jt, jf, k) tuples."""
    LD_W_ABS, JEQ_K, JGE_K, JSET_K, RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
    ALLOW, KILL, EPERM = 0x7FFF0000, 0x80000000, 0x00050000 | 1
    column = 0 if arch == "x86_64" else 1
    nr, arch_at, arg0, arg1 = 0, 4, 16, 24
    prog = [(LD_W_ABS, 0, 0, arch_at), (JEQ_K, 1, 0, AUDIT_ARCH[arch]), (RET_K, 0, 0, KILL)]

    def guarded(number, checks):
        # load nr; not this call: skip the block; each check failing: jump to the deny
        block = [(LD_W_ABS, 0, 0, nr), (JEQ_K, 0, 2 * len(checks) + 2, number)]
        for i, (offset, value) in enumerate(checks):
            block += [(LD_W_ABS, 0, 0, offset), (JEQ_K, 0, 2 * (len(checks) - 1 - i) + 1, value)]
        return block + [(RET_K, 0, 0, ALLOW), (RET_K, 0, 0, EPERM)]

    def one_of(number, offset, values):
        # load nr; not this call: skip the block; load the argument; a value listed: allow
        n = len(values)
        block = [(LD_W_ABS, 0, 0, nr), (JEQ_K, 0, n + 3, number), (LD_W_ABS, 0, 0, offset)]
        block += [(JEQ_K, n - i, 0, value) for i, value in enumerate(values)]
        return block + [(RET_K, 0, 0, EPERM), (RET_K, 0, 0, ALLOW)]

    def flagged(number, offset, bit):
        # load nr; not this call: skip the block; load the argument; the bit set: allow
        return [(LD_W_ABS, 0, 0, nr), (JEQ_K, 0, 4, number), (LD_W_ABS, 0, 0, offset),
                (JSET_K, 0, 1, bit), (RET_K, 0, 0, ALLOW), (RET_K, 0, 0, EPERM)]

    prog += guarded(PRLIMIT64[column], [(arg0, 0), (arg0 + 4, 0)])
    prog += guarded(IOCTL[column], [(arg1, TCGETS)])
    prog += one_of(FCNTL[column], arg1, FCNTL_ALLOWED)
    prog += flagged(FUTEX[column], arg1, FUTEX_PRIVATE_FLAG)
    prog.append((LD_W_ABS, 0, 0, nr))
    if arch == "x86_64":                   # the x32 ABI's numbers: none of ours
        prog.append((JGE_K, 0, 1, X32_SYSCALL_BIT))
        prog.append((RET_K, 0, 0, EPERM))
    for numbers in ALLOWED_SYSCALLS.values():
        if numbers[column] is not None:
            prog += [(JEQ_K, 0, 1, numbers[column]), (RET_K, 0, 0, ALLOW)]
    prog.append((RET_K, 0, 0, EPERM))
    return prog


def install_seccomp(libc):
    """Load the allow list (PR_SET_SECCOMP, SECCOMP_MODE_FILTER); a description or ''."""
    try:
        import ctypes
        arch = platform_arch()
        if arch not in AUDIT_ARCH:
            return ""
        prog = seccomp_program(arch)

        class Filter(ctypes.Structure):
            _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8),
                        ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]

        class Program(ctypes.Structure):
            _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(Filter))]

        filters = (Filter * len(prog))(*[Filter(*insn) for insn in prog])
        program = Program(len(prog), filters)
        if libc.prctl(PR_SET_SECCOMP, 2, ctypes.byref(program), 0, 0) != 0:
            return ""
        return "seccomp(allow list of %d system calls: no network, fork, exec, kill, ptrace, " \
               "mount, chmod)" % (sum(n[0 if arch == "x86_64" else 1] is not None
                                     for n in ALLOWED_SYSCALLS.values()) + len(GUARDED))
    except Exception:
        return ""


def apply_rlimits(limits):
    try:
        import resource
    except ImportError:                      # not on this platform: wall clock still applies
        return "rlimits unavailable"
    wanted = [("as", resource.RLIMIT_AS, limits.get("as")),
              ("cpu", resource.RLIMIT_CPU, limits.get("cpu")),
              ("fsize", resource.RLIMIT_FSIZE, limits.get("fsize")),
              ("nofile", resource.RLIMIT_NOFILE, limits.get("nofile")),
              ("core", resource.RLIMIT_CORE, 0)]
    if os.getuid() != 0:                     # the kernel ignores RLIMIT_NPROC for root
        wanted.append(("nproc", resource.RLIMIT_NPROC, 0))
    done = []
    for name, which, value in wanted:
        if value is None:
            continue
        hard = value + 1 if name == "cpu" else value   # soft: SIGXCPU, then SIGKILL a second later
        try:
            resource.setrlimit(which, (value, hard))
            done.append(name)
        except (ValueError, OSError):
            pass
    return "rlimits(" + ",".join(done) + ")"


# ----------------------------------------------------------------------------- output capture

class Capture(io.TextIOBase):
    """sys.stdout and sys.stderr: keeps the first `keep` characters, drops the rest."""

    def __init__(self, keep):
        self.keep, self.parts, self.size = keep, [], 0

    def writable(self):
        return True

    def write(self, text):
        if type(text) is not str:
            raise TypeError("write() argument must be str, not " + type(text).__name__)
        room = self.keep - self.size
        if room > 0:
            piece = text[:room]
            self.parts.append(piece)
            self.size += len(piece)
        return len(text)

    def take(self):
        text = "".join(self.parts)
        self.parts, self.size = [], 0
        return text


# ----------------------------------------------------------------------------- values

class Unsendable(Exception):
    """An answer the wire cannot carry: what the value is and, once it has left the
    dataclasses and tuples that held it, where it was in the answer (Verdict.reason,
    value[2]), so the learner reads which of their fields to change."""

    def __init__(self, what, fix=""):
        super().__init__(what)
        self.what, self.fix, self.root, self.path = what, fix, "", []

    def inside(self, root, step):
        self.root = root                 # each enclosing value overwrites: the outermost stays
        self.path.insert(0, step)

    def __str__(self):
        place = "returned %s as " % (self.root + "".join(self.path)) if self.path else "returned "
        return place + self.what + (": " + self.fix if self.fix else "")


# Plain kinds a value may be a subclass of, each with the fix: an Enum member (IntEnum,
# StrEnum, a str mixin) or a namedtuple is a subclass the encoder refuses on purpose.
_PLAIN_BASES = ((str, "return a plain str (for an Enum member, its .value)"),
                (int, "return a plain int (for an Enum member, its .value)"),
                (float, "return a plain float"),
                (tuple, "return a plain tuple, tuple(...) of it"),
                (list, "return a plain tuple, tuple(...) of it"),
                (dict, "return a plain dict, dict(...) of it"))


def unsendable(v):
    """Unsendable for a value of no kind the wire carries, saying what it is and the fix."""
    name = type_name(v)
    a = "an" if name[:1].lower() in "aeiou" else "a"
    try:
        t = type(v)
        for base, fix in _PLAIN_BASES:
            if issubclass(t, base):
                return Unsendable("%s %s, a subclass of %s" % (a, name, base.__name__), fix)
        if issubclass(t, (bytes, bytearray, memoryview)):
            # Iterable, but a tuple of their ints is never the answer: where the course asks
            # for text (lesson 4's key) a digest's .digest() came for its .hexdigest().
            return Unsendable("%s %s" % (a, name), "return a str, not bytes (of a digest, its "
                                                   ".hexdigest(); of bytes b, b.hex() or b.decode())")
        if issubclass(t, types.GeneratorType):
            # Most often a yield where a return was meant: "return a tuple" alone sent a
            # choose_chunk that yielded its ChunkPlan looking for a tuple to return.
            return Unsendable("%s %s" % (a, name), "a yield in the function makes it return one; "
                                                   "return the value itself, or tuple(...) of it "
                                                   "where a tuple is asked for")
        if issubclass(t, collections.abc.Iterable):
            # A map, filter, set, range or dict view: values, in no tuple yet.
            return Unsendable("%s %s" % (a, name), "return a tuple, tuple(...) of it")
    except BaseException:            # a class that lies about itself: say only its name
        pass
    return Unsendable("an object of type " + name)


def make_decoder(classes):
    def decode(v):
        if type(v) is list:                        # the shapes hold tuples, never lists
            for x in v:
                if type(x) is list or type(x) is dict:
                    return tuple([decode(x) for x in v])
            return tuple(v)        # a flat list (a request's tokens, decode contexts): as is
        if type(v) is dict:
            if "__type__" not in v:
                return {k: decode(x) for k, x in v.items()}
            cls = classes[v["__type__"]]
            values = v.get("__fields__")
            if type(values) is list and len(v) == 2:      # the fields' values, in order
                return cls(*[x if type(x) not in (list, dict) else decode(x) for x in values])
            return cls(**{k: decode(x) for k, x in v.items() if k != "__type__"})
        return v
    return decode


_field_names = {}


def encode(v, depth=0):
    """A returned value as plain JSON. Exact types only: a subclass of int or str could
    carry a hostile __repr__ or __eq__ into the encoder."""
    if depth > MAX_DEPTH:
        raise Unsendable("a value nested more than %d levels deep" % MAX_DEPTH)
    t = type(v)
    if v is None or t is bool or t is int or t is float or t is str:
        return v
    if t is list or t is tuple:
        out = []
        for x in v:
            try:
                out.append(encode(x, depth + 1))
            except Unsendable as exc:
                exc.inside("value", "[%d]" % len(out))
                raise
        return out
    if t is dict:
        if "__type__" in v:
            # The wire's own tag for a dataclass: a dict spelling one would be read as the
            # class it names, and a dict is never what a graded function returns.
            raise Unsendable("a dict with a '__type__' key",
                             "return the class itself from reference.shapes, not a dict of its fields")
        out = {}
        for k, x in v.items():
            if type(k) is not str:
                raise Unsendable("a dict with a key of type " + type_name(k))
            out[k] = encode(x, depth + 1)
        return out
    names = _field_names.get(t)
    if names is None and dataclasses.is_dataclass(t):
        # Fields of the class, then getattr on the instance: never dataclasses.asdict,
        # which deep-copies arbitrary objects.
        names = _field_names[t] = tuple(f.name for f in dataclasses.fields(t))
    if names is not None:
        out = {"__type__": t.__name__}
        for name in names:
            try:
                out[name] = encode(getattr(v, name), depth + 1)
            except Unsendable as exc:
                exc.inside(t.__name__, "." + name)
                raise
        return out
    raise unsendable(v)


def type_name(v):
    try:
        name = type(v).__name__
        return name if type(name) is str else "?"
    except BaseException:
        return "?"


def one_line(text):
    text = " ".join(str(text).split())
    return text if len(text) <= DETAIL_CHARS else text[:DETAIL_CHARS - 3] + "..."


IPYTHON_ONLY = ("get_ipython", "display", "In", "Out")   # names IPython's namespace adds

CELLS = []   # a notebook's code cells: [first line in the source, cell number], from setup


def line_words(line):
    """'line 7'; in a notebook 'cell 3, line 2', as the learner's editor numbers it."""
    if type(line) is int:
        for first, cell in reversed(CELLS):
            if line >= first:
                return "cell %d, line %d" % (cell, line - first + 1)
    return "line %s" % line


def describe(exc, filename):
    """'ValueError: bad size (exercise.py line 7)': the type, the message, the learner's line.

    Total: an exception whose message is a hostile str subclass, or whose attributes raise,
    is still described, never turned into a crash of the child (the learner would read
    that their function ended the process, when it raised)."""
    try:
        return _describe(exc, filename)
    except BaseException:
        return one_line(type_name(exc) + ": <message could not be printed>")


def _describe(exc, filename):
    try:
        msg = str(exc)
        # str() hands back a str subclass as it is, with its own __add__ and __radd__.
        msg = str.__str__(msg) if isinstance(msg, str) else "<message could not be printed>"
    except BaseException:
        msg = "<message could not be printed>"
    text = type_name(exc) + (": " + msg if msg else "")
    try:
        line, tb = None, exc.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == filename:
                line = tb.tb_lineno
            tb = tb.tb_next
        if line is not None:
            text += " (%s %s)" % (filename, line_words(line))
    except BaseException:
        pass
    if type(exc) is NameError and getattr(exc, "name", None) in IPYTHON_ONLY:
        # It ran in the learner's notebook: say why it does not here.
        text += ": %s exists only in IPython (Jupyter); a graded file runs as plain Python" % exc.name
    if type(exc) in (ImportError, ModuleNotFoundError):
        # The learner's own machine has it, and the message alone reads like an install
        # problem: say what a submission can import.
        text += ": a submission runs with the standard library and reference.shapes only"
    return one_line(text)


# ----------------------------------------------------------------------------- main

def build_reference(shapes_source):
    """`reference` as an empty package holding only `reference.shapes`: the one course
    module a submission may import. An empty __path__ makes every other submodule fail."""
    package = types.ModuleType("reference")
    package.__path__ = []
    shapes = types.ModuleType("reference.shapes")
    sys.modules["reference"] = package
    sys.modules["reference.shapes"] = shapes        # dataclasses looks the module up by name
    exec(compile(shapes_source, "reference/shapes.py", "exec"), shapes.__dict__)
    package.shapes = shapes
    return {name: getattr(shapes, name) for name in shapes.__all__
            if isinstance(getattr(shapes, name), type)}


def display(*objs, **kwargs):
    """Jupyter's display() in a graded notebook: what it shows, like what print() writes, is
    never shown. Without it a notebook that ran in Jupyter failed to load on one display()."""
    print(*objs)


# A restarted child stands for the worker coming back later as another process: its
# clocks read later and its process ids otherwise. Under bwrap every child has its own PID
# namespace (the same ids each time) and starts seconds after the one before, so without
# this a key salted by the pid or the hour was the same in both of lesson 4's processes.
# What the file is told, not a confinement: a file could read the kernel's clock another
# way, but a salt only ever costs its own grade, so nothing is gained by seeing through it.
LATER_S = 3753 * 86400 + 11849      # ten years, a quarter and 3 h 17 min 29 s per start
OTHER_IDS = 7919                    # added to every process id per start
CPU_CLOCKS = ("CLOCK_PROCESS_CPUTIME_ID", "CLOCK_THREAD_CPUTIME_ID")


def another_process(start):
    """From the ``start``-th child (0 for the first) on, the clocks and ids learner code
    reads through the standard library are moved by ``start`` steps."""
    if type(start) is not int or start <= 0:
        return
    import datetime
    import threading
    import time
    later, ids = start * LATER_S, start * OTHER_IDS
    t = {name: getattr(time, name) for name in (
        "time", "time_ns", "localtime", "gmtime", "ctime", "asctime", "strftime", "monotonic",
        "monotonic_ns", "perf_counter", "perf_counter_ns", "clock_gettime", "clock_gettime_ns")}
    cpu = {getattr(time, n) for n in CPU_CLOCKS if hasattr(time, n)}

    def now(secs=None):
        return t["time"]() + later if secs is None else secs

    time.time = lambda: t["time"]() + later
    time.time_ns = lambda: t["time_ns"]() + later * 10**9
    time.localtime = lambda secs=None: t["localtime"](now(secs))
    time.gmtime = lambda secs=None: t["gmtime"](now(secs))
    time.ctime = lambda secs=None: t["ctime"](now(secs))
    time.asctime = lambda tm=None: t["asctime"](time.localtime() if tm is None else tm)
    time.strftime = lambda fmt, tm=None: t["strftime"](fmt, time.localtime() if tm is None else tm)
    time.monotonic = lambda: t["monotonic"]() + later
    time.monotonic_ns = lambda: t["monotonic_ns"]() + later * 10**9
    time.perf_counter = lambda: t["perf_counter"]() + later
    time.perf_counter_ns = lambda: t["perf_counter_ns"]() + later * 10**9
    time.clock_gettime = lambda clk: t["clock_gettime"](clk) + (0 if clk in cpu else later)
    time.clock_gettime_ns = lambda clk: (t["clock_gettime_ns"](clk)
                                         + (0 if clk in cpu else later * 10**9))

    class Date(datetime.date):
        __slots__ = ()

        @classmethod
        def today(cls):
            return cls.fromtimestamp(time.time())

    class Datetime(datetime.datetime, Date):
        __slots__ = ()

        @classmethod
        def now(cls, tz=None):
            return cls.fromtimestamp(time.time(), tz)

        @classmethod
        def utcnow(cls):
            return cls.utcfromtimestamp(time.time())

        @classmethod
        def today(cls):
            return cls.fromtimestamp(time.time())

    for cls, name in ((Date, "date"), (Datetime, "datetime")):
        cls.__name__ = cls.__qualname__ = name
        cls.__module__ = "datetime"
        setattr(datetime, name, cls)
    for name in ("getpid", "getppid", "getpgrp"):
        real = getattr(os, name)
        setattr(os, name, lambda real=real: real() + ids)
    for name in ("getpgid", "getsid"):
        real = getattr(os, name)
        setattr(os, name, lambda pid, real=real: real(pid - ids if pid else 0) + ids)
    native = threading.get_native_id
    threading.get_native_id = lambda: native() + ids


def builtins_guard():
    """restore() -> what a learner is told of the names their code rebound or deleted in
    Python's builtins since this was called ("" when none), once they are put back as they
    were. The child's own code (the encoder, the frame writer) calls len, type, isinstance...:
    a submission that rebinds one broke the conversation, and was told only "sent a malformed
    frame" or "exited with code 1". restore looks up no builtin by name before they are back:
    it holds the functions it uses, taken here, and methods of dicts taken here, which no
    submission can rebind."""
    names = builtins.__dict__
    saved = dict(names)
    originals, count = tuple(saved.values()), len(saved)
    items, get, update, current = saved.items, names.get, names.update, names.values
    size, every, pair, same = len, all, map, operator.is_

    def restore():
        # It runs once a call: the usual case, nothing touched, is one identity test per
        # name in order, in C (2 us where the walk below takes 13). Identity, never ==: a
        # rebound object's __eq__ is learner code.
        if size(names) == count and every(pair(same, current(), originals)):
            return ""
        changed = [name for name, value in items() if get(name, restore) is not value]
        update(saved)
        if not changed:
            return ""               # names added only: nothing of the child's is shadowed
        shown = ", ".join(sorted(changed)[:5]) + (", ..." if len(changed) > 5 else "")
        return ("it rebound Python's builtin%s %s: a submission may not change the builtins (the "
                "grader's own code in the sandbox uses them)" % ("s" if len(changed) > 1 else "", shown))
    return restore


def load_submission(source, filename):
    module = types.ModuleType("exercise")
    module.__file__ = filename
    if CELLS:                             # a notebook: Jupyter's namespace has display()
        module.display = display
    sys.modules["exercise"] = module
    try:
        code = compile(source, filename, "exec")
    except SyntaxError as exc:
        # Named as every other load error is (describe): the message, then the file and line.
        return module, one_line("%s: %s (%s %s)" % (type(exc).__name__, exc.msg, filename,
                                                     line_words(exc.lineno)))
    except BaseException as exc:          # null bytes, nesting too deep, out of memory
        return module, describe(exc, filename)
    try:
        exec(code, module.__dict__)
    except BaseException as exc:          # SystemExit too: the submission does not get to exit
        return module, describe(exc, filename)
    return module, None


def run_call(namespace, fname, args, decode, filename, restore):
    fn = namespace.get(fname) if type(fname) is str else None
    if fn is None or not callable(fn):
        return {"missing": fname}
    try:
        args = [decode(a) for a in args]
    except Exception as exc:
        return {"bad": one_line("the grader sent an argument that could not be decoded: %r" % exc)}
    try:
        value = fn(*args)
    except BaseException as exc:
        rebound = restore()
        if rebound:
            return {"bad": rebound}
        said = describe(exc, filename)
        tb = exc.__traceback__
        if type(exc) is TypeError and tb is not None and tb.tb_next is None:
            # Raised by the call itself, not by a line of the learner's: its parameters are
            # not the stub's ("takes 1 positional argument but 2 were given").
            said = one_line(said + ": the grader calls it with the arguments its stub declares")
        return {"raised": said}
    # One guard check after the call and the encoding both (the encoder may run learner code:
    # a property). An encoding under rebound builtins is bounded (MAX_DEPTH) and thrown away.
    try:
        encoded = encode(value)
    except BaseException as exc:          # Unsendable, hostile __getattr__, RecursionError...
        rebound = restore()               # before the words: they use the builtins
        if rebound:
            return {"bad": rebound}
        if isinstance(exc, Unsendable):
            return {"bad": one_line(str(exc))}
        return {"bad": one_line("returned a value that could not be read (%s)" % describe(exc, filename))}
    rebound = restore()
    if rebound:
        return {"bad": rebound}
    return {"ok": encoded}


def main(argv):
    rfd, wfd = int(argv[1]), int(argv[2])
    # Learner writes to the real stdio go nowhere, at the OS level.
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)

    setup = read_frame(rfd)
    limits = setup.get("limits", {})
    filename = os.path.basename(setup.get("filename") or "exercise.py")
    CELLS[:] = sorted(c for c in setup.get("cells", ()) if type(c) is list and len(c) == 2
                      and all(type(x) is int for x in c))
    classes = build_reference(setup["shapes_source"])
    decode = make_decoder(classes)
    max_frame = limits.get("max_frame", 8 << 20) - 64
    send_chars = limits.get("stdout_send", 1024)

    applied, lacks = harden(setup["workdir"], limits)
    if lacks and setup.get("require_confinement"):
        # The grader asked for confinement and this child could not build it: no learner
        # code runs in it at all.
        write_frame(wfd, {"isolation": applied, "refused": lacks})
        return
    write_frame(wfd, {"isolation": applied, "lacks": lacks})

    # Learner code may rebind json.dumps, os.write or this module's functions: the
    # conversation keeps the references taken here, before any learner code runs, so a
    # submission that does so still has its answers delivered (and judged).
    dumps, write, read, call, explain, take = (compact_encoder(), os.write, FrameReader(rfd),
                                               run_call, describe, Capture.take)

    def send(obj):
        try:
            data = dumps(obj).encode()
        except BaseException as exc:    # e.g. an int too long to print
            data = dumps({"bad": "returned a value that could not be sent (%s)"
                          % explain(exc, filename)}).encode()
        if len(data) > max_frame:
            data = dumps({"bad": "returned a value too large to send (%d bytes)"
                          % len(data)}).encode()
        data = len(data).to_bytes(4, "big") + data
        while data:
            data = data[write(wfd, data):]

    capture = Capture(limits.get("stdout_keep", 4096))
    sys.stdout = sys.stderr = capture
    another_process(setup.get("start"))
    restore = builtins_guard()
    module, error = load_submission(setup["submission"], filename)
    rebound = restore()
    if rebound and error is None:
        error = rebound
    loaded = {"loaded": error is None, "stdout": take(capture)[:send_chars]}
    if error is not None:
        loaded["error"] = error
    send(loaded)
    namespace = module.__dict__

    while True:
        try:
            request = read()
        except EOFError:                  # the parent is gone or done: so are we
            return
        for fname, args in request["calls"]:
            take(capture)
            result = call(namespace, fname, args, decode, filename, restore)   # guarded within
            printed = take(capture)
            sys.stdout = sys.stderr = capture   # in case the submission replaced them
            if printed:
                result["stdout"] = printed[:send_chars]
            send(result)


if __name__ == "__main__":
    main(sys.argv)

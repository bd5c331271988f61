"""The child process that runs a learner's submission. Standard library only.

Started by grader.engine.sandbox.session as ``python -I -S child.py READ_FD WRITE_FD`` (under
bwrap and setpriv when grader.engine.sandbox.isolation can): no site-packages, no environment,
no script directory on sys.path, so nothing of the grader is importable. Everything it
learns arrives on READ_FD; everything it says leaves on WRITE_FD. A frame is a 4-byte
big-endian length and that many bytes of UTF-8 JSON.

Conversation:
  parent -> {"shapes_source", "submission", "filename", "workdir", "limits"}
  child  -> {"isolation": [...]}       sent after hardening, before any learner code runs
  child  -> {"loaded": true} | {"loaded": false, "error": "..."}
  parent -> {"calls": [[fname, [args...]], ...]}
  child  -> one frame per call, in order: {"ok": v} | {"raised": s} | {"missing": s} | {"bad": s}
            (+ "stdout" when the call printed)
One frame per call rather than one per batch: when a call hangs, the parent knows exactly
which one it was and keeps every answer before it.

Nothing here is trusted by the parent: learner code shares this process and can rewrite
any of it. These checks exist to give honest submissions precise feedback; the parent
re-validates every byte.
"""
import dataclasses
import io
import json
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


def write_frame(fd, obj):
    data = json.dumps(obj, separators=(",", ":")).encode()
    data = len(data).to_bytes(4, "big") + data
    while data:
        data = data[os.write(fd, data):]


# ----------------------------------------------------------------------------- hardening

def harden(workdir, limits):
    """Apply every restriction we can before learner code runs; say which ones took."""
    applied = []
    os.chdir(workdir)
    os.umask(0o077)
    is_root = hasattr(os, "geteuid") and os.geteuid() == 0
    libc = load_libc()
    # Only root may make a network namespace without a user namespace (which the spec
    # rules out); inside it there is nothing but a loopback that is down.
    if is_root and libc is not None and libc.unshare(0x40000000) == 0:   # CLONE_NEWNET
        applied.append("private network namespace")
    if is_root:
        note = drop_uid(workdir)
        is_root = os.geteuid() == 0
        applied.append(note)
    elif hasattr(os, "geteuid"):
        # Started unprivileged (by setpriv under bwrap, or by a non-root grader).
        applied.append("uid %d%s" % (os.geteuid(), " with no capabilities"
                                     if libc is not None and no_capabilities(libc) else ""))
    if libc is not None:
        # PR_SET_PDEATHSIG SIGKILL (after the uid drop, which clears it): a grader killed
        # with -9 must not leave a looping submission spinning until its CPU limit.
        libc.prctl(1, 9, 0, 0, 0)
        libc.prctl(4, 0, 0, 0, 0)              # PR_SET_DUMPABLE 0: no ptrace, no /proc/pid/mem
        if libc.prctl(38, 1, 0, 0, 0) == 0:     # PR_SET_NO_NEW_PRIVS: setuid binaries stay powerless
            applied.append("no_new_privs")
    filtered = install_seccomp(deny_fs_writes=is_root)
    if filtered:
        applied.append("seccomp(" + filtered + ")")
    applied.append(apply_rlimits(limits, is_root))
    return applied


def load_libc():
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes
        return ctypes.CDLL(None, use_errno=True)
    except Exception:
        return None


def no_capabilities(libc):
    """True when this process holds no capability in any set, bounding set included."""
    try:
        import ctypes
        header = (ctypes.c_uint32 * 2)(0x20080522, 0)      # _LINUX_CAPABILITY_VERSION_3, self
        data = (ctypes.c_uint32 * 6)()                     # 2 x (effective, permitted, inheritable)
        if libc.capget(header, data) != 0 or any(data):
            return False
        for cap in range(64):
            held = libc.prctl(23, cap, 0, 0, 0)            # PR_CAPBSET_READ
            if held < 0:                                   # past the last capability
                break
            if held or libc.prctl(47, 1, cap, 0, 0) == 1:  # PR_CAP_AMBIENT_IS_SET
                return False
        return True
    except Exception:
        return False


def drop_uid(workdir):
    """Become 'nobody' so the learner cannot read the grader's files or its /proc/environ.

    Only when the interpreter's own files are readable by that user: otherwise every
    later `import math` would fail and honest code would be graded as broken.
    """
    try:
        import pwd
        entry = pwd.getpwnam("nobody")
        uid, gid = entry.pw_uid, entry.pw_gid
    except Exception:
        uid = gid = 65534
    for path in sys.path:
        blocker = os.path.isdir(path) and closed_to_others(path)
        if blocker:
            return "still root (uid drop skipped: %s is closed to uid %d)" % (blocker, uid)
    try:
        os.chown(workdir, uid, gid)
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
    except OSError as exc:
        return "still root (uid drop failed: %s)" % exc.strerror
    return "uid %d" % uid


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


# Syscalls no grading exercise needs: network, new processes and threads, tracing or
# signalling other processes (other submissions run under the same uid), mounts and
# namespaces, and io_uring (its operations bypass seccomp).
DENIED = (
    "socket", "fork", "vfork", "clone", "clone3", "ptrace", "process_vm_readv",
    "process_vm_writev", "kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo",
    "pidfd_open", "pidfd_send_signal", "pidfd_getfd", "mount", "umount2", "pivot_root",
    "chroot", "unshare", "setns", "io_uring_setup", "bpf", "perf_event_open", "keyctl",
    "add_key", "request_key", "open_by_handle_at", "name_to_handle_at", "userfaultfd",
    "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
    "reboot", "swapon", "swapoff", "syslog", "iopl", "ioperm",
)
# A child that is still root can write anything it can name: deny every mutation of the
# file system (its writable fds are only the protocol pipe and /dev/null).
FS_MUTATORS = (
    "creat", "openat2", "unlink", "unlinkat", "rename", "renameat", "renameat2", "rmdir",
    "mkdir", "mkdirat", "link", "linkat", "symlink", "symlinkat", "chmod", "fchmod",
    "fchmodat", "chown", "fchown", "lchown", "fchownat", "truncate", "mknod", "mknodat",
    "utime", "utimes", "utimensat", "futimesat", "setxattr", "lsetxattr", "fsetxattr",
    "removexattr", "lremovexattr", "fremovexattr",
)


def install_seccomp(deny_fs_writes):
    """Deny the syscalls above with EPERM through libseccomp, if the library is here."""
    try:
        import ctypes
        for name in ("libseccomp.so.2", "libseccomp.so"):
            try:
                lib = ctypes.CDLL(name)
                break
            except OSError:
                lib = None
        if lib is None:
            return ""

        class ArgCmp(ctypes.Structure):
            _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int),
                        ("datum_a", ctypes.c_uint64), ("datum_b", ctypes.c_uint64)]

        lib.seccomp_init.restype = ctypes.c_void_p
        lib.seccomp_init.argtypes = [ctypes.c_uint32]
        lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
        lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int,
                                               ctypes.c_uint, ctypes.POINTER(ArgCmp)]
        lib.seccomp_load.argtypes = [ctypes.c_void_p]
        lib.seccomp_release.argtypes = [ctypes.c_void_p]
        allow, eperm, masked_eq = 0x7FFF0000, 0x00050000 | 1, 7
        ctx = lib.seccomp_init(allow)
        if not ctx:
            return ""

        def deny(name, arg=None, bit=0):
            nr = lib.seccomp_syscall_resolve_name(name.encode())
            if nr < 0:           # not a syscall on this architecture
                return
            cmp = ArgCmp(arg, masked_eq, bit, bit) if arg is not None else None
            lib.seccomp_rule_add_array(ctx, eperm, nr, 0 if cmp is None else 1,
                                       None if cmp is None else ctypes.byref(cmp))

        for name in DENIED:
            deny(name)
        if deny_fs_writes:
            for name in FS_MUTATORS:
                deny(name)
            for bit in (os.O_WRONLY, os.O_RDWR, os.O_CREAT, os.O_TRUNC):
                deny("open", 1, bit)      # open(path, flags)
                deny("openat", 2, bit)    # openat(dirfd, path, flags)
        ok = lib.seccomp_load(ctx) == 0
        lib.seccomp_release(ctx)
        if not ok:
            return ""
        return "no network, fork, ptrace, kill, mount" + (", file writes" if deny_fs_writes else "")
    except Exception:
        return ""


def apply_rlimits(limits, is_root):
    try:
        import resource
    except ImportError:                      # not on this platform: wall clock still applies
        return "rlimits unavailable"
    wanted = [("as", resource.RLIMIT_AS, limits.get("as")),
              ("cpu", resource.RLIMIT_CPU, limits.get("cpu")),
              ("fsize", resource.RLIMIT_FSIZE, limits.get("fsize")),
              ("nofile", resource.RLIMIT_NOFILE, limits.get("nofile")),
              ("core", resource.RLIMIT_CORE, 0)]
    if not is_root:                          # the kernel ignores RLIMIT_NPROC for root
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
    pass


def make_decoder(classes):
    def decode(v):
        if type(v) is list:
            return tuple(decode(x) for x in v)     # the shapes hold tuples, never lists
        if type(v) is dict:
            if "__type__" not in v:
                return {k: decode(x) for k, x in v.items()}
            cls = classes[v["__type__"]]
            return cls(**{k: decode(x) for k, x in v.items() if k != "__type__"})
        return v
    return decode


_field_names = {}


def encode(v, depth=0):
    """A returned value as plain JSON. Exact types only: a subclass of int or str could
    carry a hostile __repr__ or __eq__ into the encoder."""
    if depth > MAX_DEPTH:
        raise Unsendable("returned a value nested more than %d levels deep" % MAX_DEPTH)
    t = type(v)
    if v is None or t is bool or t is int or t is float or t is str:
        return v
    if t is list or t is tuple:
        return [encode(x, depth + 1) for x in v]
    if t is dict:
        out = {}
        for k, x in v.items():
            if type(k) is not str:
                raise Unsendable("returned a dict with a key of type " + type(k).__name__)
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
            out[name] = encode(getattr(v, name), depth + 1)
        return out
    raise Unsendable("returned an object of type " + type_name(v))


def type_name(v):
    try:
        name = type(v).__name__
        return name if type(name) is str else "?"
    except BaseException:
        return "?"


def one_line(text):
    text = " ".join(str(text).split())
    return text if len(text) <= DETAIL_CHARS else text[:DETAIL_CHARS - 3] + "..."


def describe(exc, filename):
    """'ValueError: bad size (exercise.py line 7)': the type, the message, the learner's line."""
    try:
        msg = str(exc)
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
            text += " (%s line %d)" % (filename, line)
    except BaseException:
        pass
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


def load_submission(source, filename):
    module = types.ModuleType("exercise")
    module.__file__ = filename
    sys.modules["exercise"] = module
    try:
        code = compile(source, filename, "exec")
    except SyntaxError as exc:
        return module, one_line("%s: line %s: %s" % (type(exc).__name__, exc.lineno, exc.msg))
    except BaseException as exc:          # null bytes, nesting too deep, out of memory
        return module, describe(exc, filename)
    try:
        exec(code, module.__dict__)
    except BaseException as exc:          # SystemExit too: the submission does not get to exit
        return module, describe(exc, filename)
    return module, None


def run_call(namespace, fname, args, decode, filename):
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
        return {"raised": describe(exc, filename)}
    try:
        return {"ok": encode(value)}
    except Unsendable as exc:
        return {"bad": str(exc)}
    except BaseException as exc:          # hostile __getattr__, RecursionError, MemoryError...
        return {"bad": one_line("returned a value that could not be read (%s)" % describe(exc, filename))}


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
    classes = build_reference(setup["shapes_source"])
    decode = make_decoder(classes)
    max_frame = limits.get("max_frame", 8 << 20) - 64
    send_chars = limits.get("stdout_send", 1024)

    write_frame(wfd, {"isolation": harden(setup["workdir"], limits)})

    # Learner code may rebind json.dumps, os.write or this module's functions: the
    # conversation keeps the references taken here, before any learner code runs, so a
    # submission that does so still has its answers delivered (and judged).
    dumps, write, read, call, explain, take = (json.dumps, os.write, read_frame, run_call,
                                               describe, Capture.take)

    def send(obj):
        try:
            data = dumps(obj, separators=(",", ":")).encode()
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
    module, error = load_submission(setup["submission"], filename)
    loaded = {"loaded": error is None, "stdout": take(capture)[:send_chars]}
    if error is not None:
        loaded["error"] = error
    send(loaded)
    namespace = module.__dict__

    while True:
        try:
            request = read(rfd)
        except EOFError:                  # the parent is gone or done: so are we
            return
        for fname, args in request["calls"]:
            take(capture)
            result = call(namespace, fname, args, decode, filename)
            printed = take(capture)
            sys.stdout = sys.stderr = capture   # in case the submission replaced them
            if printed:
                result["stdout"] = printed[:send_chars]
            send(result)


if __name__ == "__main__":
    main(sys.argv)

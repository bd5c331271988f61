"""How the sandbox child is contained: bubblewrap when we can, a plain process otherwise.

On Linux as root with bubblewrap (and setpriv, from util-linux) present, the child runs as

    bwrap <namespaces, binds> -- setpriv <drop to nobody> -- python -I -S /sandbox/child.py R W

- No user namespace: a root child inside one could remount and write the host's /usr.
  bwrap runs with real root privileges to build the mounts, then setpriv becomes uid/gid
  65534 with every capability set empty before the interpreter starts.
- The root is an empty tmpfs holding read-only binds of only what the interpreter needs:
  its executable, its standard library (site-packages masked), libpython, the system's
  shared-library directories (libc, libffi, libseccomp) and child.py. Parent directories
  are created 0755 (bwrap would copy a 0700 /root), so a Python installed under /root
  works. Nothing of the course, the grader, the secret or the gradebook exists inside.
- /tmp is a size-capped tmpfs and the working directory; /dev is bwrap's minimal one; there
  is no /proc. New network (only a down loopback), pid, ipc and uts namespaces,
  --die-with-parent, --new-session.

Otherwise (not Linux, not root, bwrap missing or unusable, or GRADER_SANDBOX=process) the
child is a plain process, and child.py builds the confinement itself where the kernel
allows: as root a private network namespace, a mount namespace read-only but for its tmpfs
working directory (not root: the same, in a user namespace of its own) and uid 65534 with
no capabilities; then
no_new_privs, Landlock (reads only the interpreter and the system libraries, writes only
its own working directory), rlimits and a seccomp allow list. It is *confined* when
Landlock, the allow list and a capability-free uid all took; a grade requires that (or
bwrap) and otherwise refuses (session.Unconfined), unless the instructor accepts the risk
with session.UNCONFINED_FLAG. The report says which layers were in force.
"""
from __future__ import annotations

import functools
import glob
import os
import shutil
import site
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from grader.engine.errors import InputError

MODES = ("auto", "bwrap", "process")
MODE_VARIABLE = "GRADER_SANDBOX"          # auto (default) | bwrap (required) | process
NOBODY = 65534
CHILD_INSIDE = "/sandbox/child.py"       # or child.pyc: the child run from its bytecode
TMP_INSIDE = "/tmp"
LIBRARY_DIRS = ("/lib", "/lib64", "/lib32", "/libx32", "/usr/lib", "/usr/lib64", "/usr/lib32",
                "/usr/libx32")
PROBE_TIMEOUT_S = 20
ADVICE = ("Install bubblewrap (Debian: apt-get install bubblewrap) and grade as root, or grade "
          "on Linux 5.13+ with Landlock enabled (it is in the kernel's lsm= list)")


@dataclass(frozen=True)
class Plan:
    """How to start one child: the command in front of the interpreter, where child.py and
    the working directory are as the child sees them, and what the wrapper enforces."""
    wrapper: tuple[str, ...]       # bwrap ... setpriv ... --   (empty: a plain process)
    python: str                    # the interpreter to run (behind the wrapper)
    child_path: str
    workdir: str | None            # inside the sandbox; None: the caller makes a host temp dir
    describe: str                  # the report's prefix: "bwrap(...)" or "process (no bwrap: why)"

    @property
    def wrapped(self) -> bool:
        return bool(self.wrapper)


def requested_mode(mode: str | None) -> str:
    mode = mode or os.environ.get(MODE_VARIABLE) or "auto"
    if mode not in MODES:
        raise InputError(MODE_VARIABLE, f"unknown sandbox mode {mode!r} (use {', '.join(MODES)})")
    return mode


def plan(mode: str | None, python: str, child: Path, tmp_bytes: int) -> Plan:
    """The plan for `mode` (None: $GRADER_SANDBOX, else auto). 'bwrap' without a usable
    bwrap is an error; 'auto' falls back to a plain process and says why."""
    from grader.engine.sandbox.session import SandboxError
    mode = requested_mode(mode)
    problem = None if mode == "process" else bwrap_problem(python, str(child))
    if mode == "bwrap" and problem is not None:
        raise SandboxError(f"bubblewrap was required ({MODE_VARIABLE}=bwrap) but cannot be "
                           f"used: {problem}")
    return _chosen(mode, python, child, tmp_bytes, problem)


def unprobed_plan(mode: str | None, python: str, child: Path, tmp_bytes: int) -> Plan | None:
    """The plan ``plan`` gives when bwrap's probe finds nothing wrong, read without making
    the probe (a start of bwrap and the interpreter): what a child started before the
    probe's answer would run under. None where ``plan`` would raise."""
    try:
        mode = requested_mode(mode)
    except InputError:
        return None
    problem = None if mode == "process" else _unwrappable()
    if mode == "bwrap" and problem is not None:
        return None
    return _chosen(mode, python, child, tmp_bytes, problem)


def _chosen(mode: str, python: str, child: Path, tmp_bytes: int, problem: str | None) -> Plan:
    """A plain process for mode process or where bwrap has a problem, else bwrap."""
    if mode == "process":
        return _plain(python, child, f"{MODE_VARIABLE}=process")
    return _wrapped(python, str(child), tmp_bytes) if problem is None else _plain(python, child, problem)


def _plain(python: str, child: Path, why: str) -> Plan:
    return Plan((), python, str(child), None, f"process (no bwrap: {why})")


def _wrapped(python: str, child: str, tmp_bytes: int) -> Plan:
    layers = (f"bwrap(no network, private pid/ipc/uts namespaces, read-only binds of the "
              f"interpreter and its libraries only, tmpfs /tmp {tmp_bytes >> 20} MiB, "
              f"die-with-parent, setpriv)")
    return Plan(bwrap_command(python, child, tmp_bytes), os.path.realpath(python),
                child_inside(child), TMP_INSIDE, layers)


def child_inside(child: str) -> str:
    """Where the child's program is inside bwrap: the interpreter reads a name ending in
    .pyc as bytecode."""
    return CHILD_INSIDE + "c" if child.endswith(".pyc") else CHILD_INSIDE


# ----------------------------------------------------------------------------- detection

@functools.lru_cache(maxsize=None)
def bwrap_problem(python: str, child: str) -> str | None:
    """None when bwrap can start this interpreter as nobody here; else why not. Probed once
    per process with a real start, so a container without mount rights falls back."""
    problem = _unwrappable()
    if problem is not None:
        return problem
    argv = bwrap_command(python, child, 1 << 20)
    try:
        probe = subprocess.run([*argv, os.path.realpath(python), "-I", "-S", "-c",
                                "import os, sys; sys.exit(os.getuid() != %d)" % NOBODY],
                               env={"PATH": "/usr/bin:/bin"}, stdin=subprocess.DEVNULL,
                               capture_output=True, timeout=PROBE_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap did not start ({type(exc).__name__})"
    if probe.returncode != 0:
        said = probe.stderr.decode("utf-8", "replace").strip().splitlines()
        return f"bwrap failed ({said[-1][:120] if said else 'exit %d' % probe.returncode})"
    return None


def _unwrappable() -> str | None:
    """Why bwrap cannot be used here, as far as is known without starting it."""
    if not sys.platform.startswith("linux"):
        return "not Linux"
    if os.geteuid() != 0:
        return "not root (bwrap without a user namespace needs root)"
    for tool in ("bwrap", "setpriv"):
        if shutil.which(tool) is None:
            return f"{tool} not installed"
    return None


# ----------------------------------------------------------------------------- the command

@functools.lru_cache(maxsize=None)
def bwrap_command(python: str, child: str, tmp_bytes: int) -> tuple[str, ...]:
    """bwrap + setpriv, up to the interpreter (the caller appends `python -P -s -S ...`)."""
    python = os.path.realpath(python)
    setpriv = os.path.realpath(shutil.which("setpriv") or "/usr/bin/setpriv")
    binds: list[str] = []       # read-only, host path == sandbox path
    symlinks: list[tuple[str, str]] = []
    for d in LIBRARY_DIRS:      # libc, libm, libffi, libseccomp, libcap-ng, the dynamic loader
        if os.path.islink(d):
            symlinks.append((os.readlink(d), d))
        elif os.path.isdir(d):
            binds.append(d)
    for path in (python, setpriv, *_interpreter_files()):
        if os.path.exists(path) and not _inside(path, binds):
            binds.append(path)
    masks = [p for p in _package_dirs() if _inside(p, binds)]

    argv = ["bwrap", "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
            "--die-with-parent", "--new-session",
            # Real root builds the mounts; the command keeps only what setpriv needs.
            "--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID",
            "--cap-add", "CAP_SETPCAP"]
    for d in _ancestors([*binds, child_inside(child), *(dest for _, dest in symlinks)]):
        argv += ["--perms", "0755", "--dir", d]
    for target, dest in symlinks:
        argv += ["--symlink", target, dest]
    for path in binds:
        argv += ["--ro-bind", path, path]
    for path in masks:          # other packages (maybe the grader itself) stay invisible
        argv += ["--perms", "0555", "--tmpfs", path, "--remount-ro", path]
    argv += ["--ro-bind", child, child_inside(child), "--dev", "/dev",
             "--perms", "1777", "--size", str(int(tmp_bytes)), "--tmpfs", TMP_INSIDE,
             "--chdir", TMP_INSIDE, "--",
             setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
             "--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all",
             "--no-new-privs", "--"]
    return tuple(argv)


def _interpreter_files() -> list[str]:
    """The standard library and libpython of this interpreter (not its site-packages)."""
    out = []
    for key in ("stdlib", "platstdlib"):
        path = sysconfig.get_path(key)
        if path:
            out.append(os.path.realpath(path))
    if sysconfig.get_config_var("Py_ENABLE_SHARED"):
        libdir, soname = sysconfig.get_config_var("LIBDIR"), sysconfig.get_config_var("INSTSONAME")
        if libdir and soname:
            out.append(os.path.realpath(os.path.join(libdir, soname)))
    return out


def _package_dirs() -> list[str]:
    """Every installed-packages directory the binds could expose."""
    found = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
    try:
        found.update(site.getsitepackages())
    except AttributeError:          # some virtualenvs' site module lacks it
        pass
    # A virtual environment's interpreter reports its own folders only; the base
    # interpreter's, inside the standard library folder that is bound, would be visible
    # (a course installed there without -e, or its editable finder naming the course).
    for root in _interpreter_files():
        found.update(glob.glob(os.path.join(root, "site-packages")))
        found.update(glob.glob(os.path.join(root, "dist-packages")))
    for root in LIBRARY_DIRS + ("/usr/local/lib",):
        found.update(glob.glob(os.path.join(root, "python3*", "site-packages")))
        found.update(glob.glob(os.path.join(root, "python3*", "dist-packages")))
    return sorted({os.path.realpath(p) for p in found if p and os.path.isdir(p)})


def _inside(path: str, roots) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def _ancestors(paths) -> list[str]:
    """Every proper ancestor directory of the paths, parents first."""
    out = set()
    for p in paths:
        parent = os.path.dirname(p)
        while parent not in ("/", ""):
            out.add(parent)
            parent = os.path.dirname(parent)
    return sorted(out, key=lambda p: (p.count("/"), p))

"""The attack suite with the grader itself an unprivileged user: the case where a
sandbox child that is simply "another process of the instructor's user" could write the
gradebook and the memo and read the secret, which that user owns.

The test creates a throwaway user (useradd; removed after, whatever happens), makes the
interpreter, its packages and the course reachable to it without changing the host
(bwrap, as root: a private mount namespace in which each folder closed to others, such as
a 0700 /root, becomes an empty 0755 tmpfs holding only the binds needed), and runs
as_user.py as that user: a class of every attack and one honest submission. The grader is
not root there, so there is no bwrap for its children: each runs under the fallback,
which must hold on its own.
"""
import json
import os
import pwd
import secrets
import shutil
import stat
import sqlite3
import subprocess
import sys
import sysconfig
from contextlib import closing, contextmanager
from pathlib import Path

import pytest

from conftest import ROOT, SECRET
from test_attacks import ALL, ATTACKS, HONEST, STUB

HERE = Path(__file__).resolve().parent


@contextmanager
def throwaway_user():
    name = f"grader-t{secrets.token_hex(4)}"
    subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                   check=True, capture_output=True)
    try:
        yield pwd.getpwnam(name)
    finally:
        subprocess.run(["userdel", name], capture_output=True)


def reachable(paths) -> list[str]:
    """bwrap arguments that make `paths` reachable by any user: every folder on the way that
    others cannot enter becomes a 0755 tmpfs, into which the next folder down is bound back
    (bwrap reads every bind's source from the host, so the order below works)."""
    argv = ["--dev-bind", "/", "/"]
    covers: dict[str, set] = {}
    for path in paths:
        parts = Path(os.path.realpath(path)).parts
        for depth in range(2, len(parts)):
            folder, below = os.path.join(*parts[:depth]), os.path.join(*parts[:depth + 1])
            if not os.stat(folder).st_mode & stat.S_IXOTH:
                covers.setdefault(folder, set()).add(below)
    for folder in sorted(covers, key=lambda f: f.count("/")):
        argv += ["--perms", "0755", "--tmpfs", folder]
        for below in sorted(covers[folder]):
            argv += ["--bind", below, below]
    return argv


def test_every_attack_is_held_with_the_grader_unprivileged(tmp_path):
    assert os.geteuid() == 0 and shutil.which("bwrap") and shutil.which("useradd"), \
        "this test needs root, bubblewrap and useradd (as CI has)"
    with throwaway_user() as user:
        home = tmp_path / "instructor"
        (home / "class").mkdir(parents=True)
        (home / "cache").mkdir()
        secret_file = home / "course.secret"
        secret_file.write_bytes(SECRET)
        chmod_target = home / "host-file"
        chmod_target.write_text("the instructor's")
        os.chmod(chmod_target, 0o600)
        targets = {"course_root": str(ROOT), "secret_file": str(secret_file), "reference": str(HONEST),
                   "hidden": [str(p) for p in (ROOT / "grader" / "instructor" / "families").glob("*.yaml")],
                   "gradebook": str(home / "gradebook.db"), "tcp_port": 9, "udp_port": 9,
                   "write": [str(home / "pwned.txt"), str(ROOT / "pwned-as-user.txt")],
                   "chmod_target": str(chmod_target), "memo": str(home / "cache")}
        submissions = {f"a-{name}": (ATTACKS / f"{name}.py").read_text() for name in ALL}
        submissions["z-honest"] = HONEST.read_text()
        config = home / "config.json"
        config.write_text(json.dumps({"course_root": str(ROOT), "class": str(home / "class"),
                                      "gradebook": str(home / "gradebook.db"), "targets": targets,
                                      "secret_file": str(secret_file), "submissions": submissions}))
        for path in [tmp_path, *home.rglob("*"), home]:
            os.chown(path, user.pw_uid, user.pw_gid)
        os.chmod(tmp_path, 0o755)
        os.chmod(secret_file, 0o600)
        needed = {sys.base_prefix, sys.prefix, sysconfig.get_path("purelib"),
                  sysconfig.get_path("platlib"), str(ROOT), os.path.realpath(sys.executable),
                  str(tmp_path)}
        argv = ["bwrap", *reachable(needed), "--chdir", str(home), "--",
                "setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups",
                "--inh-caps=-all", "--bounding-set=-all", "--",
                sys.executable, str(HERE / "as_user.py"), str(config)]
        env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "GRADER_CACHE": str(home / "cache"),
               "PYTHONDONTWRITEBYTECODE": "1", "LANG": "C.UTF-8"}
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=1200)
        assert done.returncode == 0, done.stderr[-3000:]
        lines = [json.loads(line) for line in done.stdout.splitlines()]
        reports = {l["student"]: l["report"] for l in lines if "student" in l}
        [summary] = [l["summary"] for l in lines if "summary" in l]
        gradebook = (home / "gradebook.db").read_bytes().decode("latin-1")
        with closing(sqlite3.connect(home / "gradebook.db")) as db:
            triggers = db.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall()
        memo = b"".join(p.read_bytes() for p in (home / "cache").iterdir())
        chmod_mode = chmod_target.stat().st_mode & 0o7777

    assert summary["students"] == len(submissions) and summary["failed"] == [], summary
    assert reports["z-honest"]["score"] == reports["z-honest"]["max_score"] > 0
    for name in ALL:
        report = reports[f"a-{name}"]
        feedback = " | ".join(c["feedback"] for c in report["criteria"])
        assert report["score"] == 0, (name, feedback)
        assert '"ok:' not in feedback, (name, feedback)
        assert report["isolation"].startswith("process (no bwrap: not root")
        assert "landlock(" in report["isolation"] and "NOT CONFINED" not in report["isolation"]
    assert SECRET.decode() not in gradebook and "return -(-tokens // page_tokens)" not in gradebook
    assert triggers == [] and b"forged" not in memo and memo
    assert chmod_mode == 0o600
    assert not any(os.path.lexists(p) for p in targets["write"])

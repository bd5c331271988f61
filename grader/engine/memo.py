"""What the course's code computes from public data alone, computed once and kept on disk.

A lesson's public cases and the oracle's run of a scenario are the same for every
submission: a batch computed them once per worker process, and every `grader check`
computed them again (lesson 5 ran the reference worker 24 times to build its record
sets). ``remember`` keeps each value in this process and in a cache folder, so the next
check reads it back.

Nothing stale can be read: every key holds the digest of the code that computes the value
(every file of grader/ and reference/, and the Python and NumPy versions), and callers key
by what determines the value (a case's digest, the course's public files). The folder is
``$GRADER_CACHE``, else ``$XDG_CACHE_HOME/serving-grader`` (``~/.cache/serving-grader``);
``GRADER_CACHE=off`` (or 0, false, no) keeps values in memory only, and ``on`` (1, true,
yes) is the default folder. Hidden cases are never written there.
A file that cannot be read back (torn, corrupt, from another version) is computed again.
Learner code never runs in this process, so nothing a submission does reaches the folder.

Nothing read back can run code: a file is grader.engine.codec's inert tagged JSON (never
pickle) behind one header line, ``serving-grader-memo 1 <sha256 of what|key|code> <sha256
of the body>``; a file whose header names another slot, or whose body does not match its
digest (torn, planted, edited), is ignored, computed again and overwritten.
"""
from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Callable, TypeVar

import numpy as np

from grader.engine import codec
from grader.engine.files import Unreadable, read_regular

T = TypeVar("T")
PACKAGE_ROOT = Path(__file__).resolve().parents[2]
_memory: dict[tuple[str, str], object] = {}


# GRADER_CACHE spelled as a switch is read as one: "on" was a folder named "on" in whatever
# directory the check ran from (a cache committed with a checkout once), and "0" one named "0".
SWITCHED_OFF = {"off", "0", "false", "no"}
SWITCHED_ON = {"on", "1", "true", "yes"}


def cache_folder() -> Path | None:
    setting = os.environ.get("GRADER_CACHE", "")
    switch = setting.lower()
    if switch in SWITCHED_OFF:
        return None
    if setting and switch not in SWITCHED_ON:
        return Path(setting)
    try:
        base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    except RuntimeError:         # no home folder: memory only
        return None
    return Path(base) / "serving-grader"


@lru_cache(maxsize=None)
def code_digest() -> str:
    h = hashlib.sha256(f"{sys.version}|{np.__version__}".encode())
    for package in ("grader", "reference"):
        for path in sorted((PACKAGE_ROOT / package).rglob("*")):
            if path.suffix in (".py", ".yaml", ".json") and "__pycache__" not in path.parts:
                h.update(str(path.relative_to(PACKAGE_ROOT)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def files_digest(*folders: Path) -> str:
    """What a course's public data is: every file's path and bytes under the folders."""
    h = hashlib.sha256()
    for folder in folders:
        for path in sorted(p for p in Path(folder).rglob("*") if p.is_file()):
            h.update(str(path).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def remember(what: str, key: str, compute: Callable[[], T], *, persist: bool = True) -> T:
    """compute(), once per (what, key): from this process, else the cache folder, else run.
    ``persist=False`` (what hidden cases determine) keeps it in this process only."""
    slot = (what, key)
    if slot in _memory:
        return _memory[slot]
    folder = cache_folder() if persist else None
    slot_digest = hashlib.sha256(f"{what}|{key}|{code_digest()}".encode()).hexdigest()
    path = folder / f"{what}-{slot_digest[:32]}.json" if folder is not None else None
    value = _read(path, slot_digest) if path is not None else _MISSING
    if value is _MISSING:
        value = compute()
        if path is not None:
            _write(path, slot_digest, value)
    _memory[slot] = value
    return value


_MISSING = object()
MAGIC = b"serving-grader-memo 1"
MAX_FILE = 256 << 20          # larger than anything the memo writes: not ours, not read


def _read(path: Path, slot_digest: str):
    """The value stored for this slot, or _MISSING (absent, torn, foreign or tampered with)."""
    try:
        raw = read_regular(path, MAX_FILE, follow_links=False)
    except (OSError, Unreadable):
        return _MISSING
    header, _, body = raw.partition(b"\n")
    expected = b" ".join((MAGIC, slot_digest.encode(), hashlib.sha256(body).hexdigest().encode()))
    if len(raw) > MAX_FILE or header != expected:
        return _MISSING
    try:
        return codec.loads(body)
    except codec.CodecError:
        return _MISSING


def _write(path: Path, slot_digest: str, value) -> None:
    """Atomically (a temporary file renamed over it), so concurrent writers never tear it;
    a folder that cannot be written only costs the speed-up."""
    body = codec.dumps(value).encode()      # a value the codec cannot store is a bug: raise
    header = b" ".join((MAGIC, slot_digest.encode(), hashlib.sha256(body).hexdigest().encode()))
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(header + b"\n" + body)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        pass

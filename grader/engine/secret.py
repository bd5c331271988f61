"""The instructor secret, and the seeds derived from it.

Hidden workloads and per-student incidents are drawn from seeds derived from one secret
file, so learners cannot tune to them while the same secret always reproduces the same
instance (re-grading gives identical scores).
"""
from __future__ import annotations

import hashlib
import hmac
from pathlib import Path

from grader.engine.files import Unreadable, read_regular

__all__ = ["SecretError", "load_secret", "derive_seed", "instance_digest"]

_SEPARATOR = "\x1f"  # ASCII unit separator: cannot appear in a label, so joins are unambiguous
_SEED_MASK = (1 << 63) - 1  # fits a signed 64-bit integer (numpy, SQLite, JSON readers)


MAX_SECRET = 1 << 20   # a secret is a few dozen bytes; a megabyte is already a mistake
# The learner edition draws a student's incident from the secret, and a learner knows their
# incident's id, so a secret can be guessed offline, guess after guess. A length floor does
# not make a secret random; it refuses the ones a first guess would find ("cs101", "s3cret").
MIN_SECRET = 16
MAKE_ONE = "head -c 32 /dev/urandom | base64 > course.secret"


class SecretError(Exception):
    """The secret cannot be used. One line naming the file."""


def load_secret(path: str | Path) -> bytes:
    """The secret's bytes. Surrounding whitespace is dropped, so a trailing newline left by
    an editor or ``echo`` does not silently change every derived seed."""
    if Path(path).is_dir():
        raise SecretError(f"{path}: is a directory, not a secret file")
    try:
        data = read_regular(path, MAX_SECRET)      # a FIFO or /dev/zero is refused unread
    except FileNotFoundError:
        raise SecretError(f"{path}: secret file not found") from None
    except Unreadable as exc:
        raise SecretError(f"{path}: cannot read the secret file: {exc.strerror or 'it ' + str(exc)}") from None
    if len(data) > MAX_SECRET:
        raise SecretError(f"{path}: the secret file is larger than {MAX_SECRET} bytes; a secret "
                          f"is a few dozen random bytes")
    secret = data.strip()
    if not secret:
        raise SecretError(f"{path}: the secret file is empty")
    if len(secret) < MIN_SECRET:
        raise SecretError(f"{path}: the secret is {len(secret)} bytes, short enough to be guessed "
                          f"(at least {MIN_SECRET}); make a random one: {MAKE_ONE}")
    return secret


def derive_seed(secret: bytes, *labels: str) -> int:
    """A 63-bit seed: the first 8 bytes (big-endian) of HMAC-SHA256(secret, labels joined
    by \\x1f), top bit cleared. Different labels give independent seeds."""
    if not isinstance(secret, (bytes, bytearray)) or not secret:
        raise ValueError("derive_seed needs a non-empty bytes secret")
    for label in labels:
        if not isinstance(label, str):
            raise TypeError(f"derive_seed labels must be strings, got {type(label).__name__}")
        if _SEPARATOR in label:
            raise ValueError(f"derive_seed label {label!r} contains the separator \\x1f")
    mac = hmac.new(bytes(secret), _SEPARATOR.join(labels).encode("utf-8"), hashlib.sha256)
    return int.from_bytes(mac.digest()[:8], "big") & _SEED_MASK


def instance_digest(obj_json: str) -> str:
    """A short fingerprint of an instance (its canonical JSON): sha256 hex, first 16 chars."""
    return hashlib.sha256(obj_json.encode("utf-8")).hexdigest()[:16]

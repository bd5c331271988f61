"""A learner's submission: a .py file, or a notebook flattened to its code cells."""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

from grader.errors import InputError

MAX_BYTES = 1 << 20   # a submission is a few functions; a megabyte is already suspicious
_MAGIC = re.compile(r"^\s*(%|!)")


@dataclass(frozen=True)
class Submission:
    path: str
    source: str
    digest: str                  # sha256 of the exact bytes graded
    notes: tuple[str, ...] = ()  # what the loader changed, for the report


def load_submission(path: Path) -> Submission:
    where = str(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise InputError(where, "no such submission file") from None
    except IsADirectoryError:
        raise InputError(where, "is a folder; give the exercise file (.py or .ipynb)") from None
    except OSError as e:
        raise InputError(where, f"cannot read the submission: {e.strerror}") from None
    if len(raw) > MAX_BYTES:
        raise InputError(where, f"submission is {len(raw)} bytes; the limit is {MAX_BYTES}")
    if b"\x00" in raw:
        raise InputError(where, "is a binary file, not Python source or a notebook")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(where, f"is not UTF-8 text (byte {e.start})") from None
    digest = hashlib.sha256(raw).hexdigest()
    if path.suffix == ".ipynb":
        source, notes = _notebook_source(text, where)
        return Submission(where, source, digest, notes)
    if path.suffix != ".py":
        raise InputError(where, "a submission is a .py file or a .ipynb notebook")
    if not text.strip():
        raise InputError(where, "the submission is empty")
    return Submission(where, text, digest)


def _notebook_source(text: str, where: str) -> tuple[str, tuple[str, ...]]:
    """Code cells in order; IPython magics and shell escapes dropped, with a note each."""
    try:
        nb = json.loads(text)
        cells = nb["cells"]
        if not isinstance(cells, list):
            raise TypeError
    except (ValueError, KeyError, TypeError):
        raise InputError(where, "cells: not a readable Jupyter notebook") from None
    parts, notes = [], []
    for n, cell in enumerate(cells):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        src = cell.get("source", "")
        lines = "".join(src).splitlines() if isinstance(src, list) else str(src).splitlines()
        kept = []
        for line in lines:
            if _MAGIC.match(line):
                notes.append(f"cell {n + 1}: dropped {line.strip()[:60]!r} (IPython magic or shell escape)")
                kept.append("")          # keep line numbers stable within the cell
            else:
                kept.append(line)
        parts.append(f"# --- cell {n + 1} ---\n" + "\n".join(kept))
    if not parts:
        raise InputError(where, "cells: the notebook has no code cells")
    return "\n\n".join(parts) + "\n", tuple(notes)

"""Which grading code made a grade: the package's version and a digest of the sources every
grade stands on (the engine, the lessons, the course machinery and the reference worker).

A gradebook keeps it with each result, so a class is never quietly graded by two graders:
results made by other code (an upgrade between two runs, a Dask worker with another copy)
are refused or regraded like results of another rubric version or other cases. The rubric,
the secret and the public cases have their own marks (the rubric's version, the cases
digest); the instructor's tools, which record and export but do not grade, are left out,
so upgrading those alone keeps a gradebook's results.
"""
from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from grader import __version__

# Relative to the folder that holds the `grader` and `reference` packages.
GRADING_CODE = ("grader/engine", "grader/lessons", "grader/course", "reference")
_ROOT = Path(__file__).resolve().parents[2]


# What an install ships of the packages (pyproject.toml's package data beside the modules),
# so what a grade can load: not compiled copies, nor what editors and file managers leave
# beside a source (``.m.py.swp``, ``m.py~``, ``.DS_Store``). Read, those made a lesson file
# open in an editor look like other grading code, and a checkout unlike a worker's install.
# The memo's code digest (grader.engine.memo.code_digest) reads the same files.
SOURCE_SUFFIXES = (".py", ".yaml", ".json")


def is_source(path: Path) -> bool:
    return path.suffix in SOURCE_SUFFIXES and "__pycache__" not in path.parts


@functools.cache
def grading_version() -> str:
    """``<version>+<12 hex digits>``, read once per process: the sources as they were when
    first asked (a process grades with the modules it imported, not with later edits)."""
    digest = hashlib.sha256()
    for part in GRADING_CODE:
        for path in sorted((_ROOT / part).rglob("*")):
            if not is_source(path) or not path.is_file():
                continue
            # Each name and content length-prefixed: no two trees digest alike.
            name, data = path.relative_to(_ROOT).as_posix().encode(), path.read_bytes()
            for field in (name, data):
                digest.update(len(field).to_bytes(8, "little") + field)
    return f"{__version__}+{digest.hexdigest()[:12]}"

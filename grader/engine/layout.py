"""Where the course lives: rubrics, assignments and the shapes module a submission may import."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from grader.engine.errors import InputError
from grader.engine.files import Unreadable, read_regular

_PACKAGE_ROOT = Path(__file__).resolve().parents[2]
# The hidden families: instructor data, drawn with the secret (never in the learner edition).
FAMILIES = _PACKAGE_ROOT / "grader" / "instructor" / "families"


@dataclass(frozen=True)
class Course:
    root: Path

    @property
    def rubrics(self) -> Path:
        return self.root / "rubrics"

    def rubric_path(self, lesson: str) -> Path:
        return self.rubrics / f"{lesson}.yaml"

    def assignment(self, lesson: str) -> Path:
        return self.root / "assignments" / lesson

    def lessons(self) -> list[str]:
        return sorted(p.stem for p in self.rubrics.glob("lesson[1-9].yaml"))

    def require_lesson(self, lesson: str) -> None:
        if not self.rubric_path(lesson).is_file():
            have = ", ".join(self.lessons()) or "none"
            raise InputError(lesson, f"no such lesson in {self.root} (lessons here: {have})")

    @property
    def shapes_source(self) -> str:
        return (_PACKAGE_ROOT / "reference" / "shapes.py").read_text(encoding="utf-8")


MAX_COURSE_FILE = 64 << 20       # far above any course file; a bound, not a budget


# libyaml's parser, where PyYAML was built with it, reads a course file about ten times as
# fast as the pure-Python one, with the same resolver and constructors, so the same values.
# A file it refuses is read again by the pure one, whose error (its line, its words) is the
# one reported.
_FAST_LOADER = getattr(yaml, "CSafeLoader", None)


def _load(text: str) -> Any:
    if _FAST_LOADER is not None:
        try:
            return yaml.load(text, Loader=_FAST_LOADER)   # noqa: S506 - a SafeConstructor
        except (yaml.YAMLError, RecursionError, *YAML_VALUE_ERRORS):
            pass
    return yaml.safe_load(text)


def read_yaml(path: Path) -> Any:
    """A course file (rubric, probes, records, scenarios) as data; every way it can be
    unusable is one InputError naming the file (and the line, for a YAML error)."""
    where = str(path)
    try:
        raw = read_regular(path, MAX_COURSE_FILE)
        if len(raw) > MAX_COURSE_FILE:
            raise InputError(where, f"larger than {MAX_COURSE_FILE >> 20} MiB: not read")
        return _load(raw.decode("utf-8"))
    except FileNotFoundError:
        raise InputError(where, "no such file") from None
    except Unreadable as e:
        raise InputError(where, str(e)) from None
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(where, f"cannot read: {e}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f"line {mark.line + 1}: " if mark else ""
        what = " ".join(str(getattr(e, "problem", None) or e).split())   # one line, always
        raise InputError(where, f"{line}not valid YAML ({what})") from None
    except RecursionError:
        raise InputError(where, "not valid YAML (nested too deeply)") from None
    except YAML_VALUE_ERRORS as e:      # PyYAML's constructors raise these on bad scalars
        raise InputError(where, f"not valid YAML (a value that cannot be read: {short_text(e)})") from None


# What PyYAML's safe constructors raise, besides YAMLError, on a scalar they cannot build:
# an impossible date (2001-02-30), an integer over Python's 4,300-digit limit, a malformed
# explicit !!timestamp.
YAML_VALUE_ERRORS = (ValueError, TypeError, AttributeError, OverflowError)


def short_text(exc: BaseException, limit: int = 120) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def find_course(explicit: str | None = None) -> Course:
    """--course, else the nearest folder above the working directory with rubrics/, else
    the folder this package was installed from."""
    if explicit:
        root = Path(explicit)
        if not (root / "rubrics").is_dir():
            raise InputError(str(root), "not a course folder (no rubrics/ inside)")
        return Course(root.resolve())
    here = Path(os.getcwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "rubrics").is_dir() and (folder / "assignments").is_dir():
            return Course(folder)
    return Course(_PACKAGE_ROOT)

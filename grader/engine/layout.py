"""Where the course lives: rubrics, assignments and the shapes module a submission may import."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import yaml

from grader.engine.errors import InputError
from grader.engine.files import Unreadable, read_regular
from reference.workload import UniqueKeys

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
# Course files nest at most seven levels. The bound is checked on the loaded data, because
# how deep a loader itself can go differs: the pure one runs out of stack near 1,000 levels,
# libyaml's parser has no limit in some builds, and what reads the data next (the schema
# check, repr, the walkers) recurses.
MAX_COURSE_DEPTH = 64


# libyaml's parser, where PyYAML was built with it, reads a course file about ten times as
# fast as the pure-Python one, with the same resolver and constructors, so the same values.
# A file it refuses is read again by the pure one, whose error (its line, its words) is the
# one reported.
# Both refuse a repeated key, as the workload and design-sheet readers do (UniqueKeys).
class _PureLoader(UniqueKeys, yaml.SafeLoader):
    pass


_FAST_LOADER = (type("_FastLoader", (UniqueKeys, yaml.CSafeLoader), {})
                if hasattr(yaml, "CSafeLoader") else None)


def _load(text: str) -> Any:
    if _FAST_LOADER is not None:
        try:
            return yaml.load(text, Loader=_FAST_LOADER)   # noqa: S506 - a SafeConstructor
        except (yaml.YAMLError, RecursionError, *YAML_VALUE_ERRORS):
            pass
    return yaml.load(text, Loader=_PureLoader)            # noqa: S506 - a SafeLoader


def read_yaml(path: Path) -> Any:
    """A course file (rubric, probes, records, scenarios) as data; every way it can be
    unusable is one InputError naming the file (and the line, for a YAML error)."""
    where = str(path)
    too_deep = f"not valid YAML (nested more than {MAX_COURSE_DEPTH} levels deep)"
    try:
        raw = read_regular(path, MAX_COURSE_FILE)
        if len(raw) > MAX_COURSE_FILE:
            raise InputError(where, f"larger than {MAX_COURSE_FILE >> 20} MiB: not read")
        data = _load(raw.decode("utf-8"))
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
        raise InputError(where, too_deep) from None
    except YAML_VALUE_ERRORS as e:      # PyYAML's constructors raise these on bad scalars
        raise InputError(where, f"not valid YAML (a value that cannot be read: {short_text(e)})") from None
    depth = nesting_depth(data)
    if depth is None:
        raise InputError(where, "a list or mapping repeated by a YAML alias (*name): not allowed in "
                                "a course file, write it out")
    if depth > MAX_COURSE_DEPTH:
        raise InputError(where, too_deep)
    return data


# What PyYAML's safe constructors raise, besides YAMLError, on a scalar they cannot build:
# an impossible date (2001-02-30), an integer over Python's 4,300-digit limit, a malformed
# explicit !!timestamp.
YAML_VALUE_ERRORS = (ValueError, TypeError, AttributeError, OverflowError)


def nesting_depth(data: Any) -> int | None:
    """How deep mappings and lists nest, walked without recursion: the data may be hostile.
    None when a list or mapping is met twice, which only a YAML alias makes (shared, or a
    cycle): an alias bomb would make any walk over it, this one included, exponential."""
    deepest, todo, seen = 0, [(data, 0)], set()
    while todo:
        node, depth = todo.pop()
        deepest = max(deepest, depth)
        if isinstance(node, Mapping):
            children = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if id(node) in seen:
            return None
        seen.add(id(node))
        todo += [(v, depth + 1) for v in children]
    return deepest


def short_text(exc: BaseException, limit: int = 120) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def find_course(explicit: str | None = None) -> Course:
    """--course, else the nearest folder above the working directory with rubrics/, else
    the folder this package was installed from (an editable install: the course itself)."""
    if explicit:
        root = Path(explicit)
        if not (root / "rubrics").is_dir():
            raise InputError(str(root), "not a course folder (no rubrics/ inside)")
        return Course(root.resolve())
    here = Path(os.getcwd()).resolve()
    for folder in (here, *here.parents, _PACKAGE_ROOT):
        if (folder / "rubrics").is_dir() and (folder / "assignments").is_dir():
            return Course(folder)
    # Installed without `-e`, the package sits in site-packages, far from the course.
    raise InputError(str(here), "no course folder here or above (one holding assignments/ and "
                                "rubrics/): run grader inside the course, or pass --course DIR")

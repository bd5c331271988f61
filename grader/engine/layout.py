"""Where the course lives: rubrics, assignments and the shapes module a submission may import."""
from __future__ import annotations

import os
import re
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
            held = self.lessons()
            raise InputError(lesson, f"no such lesson in {self.root} (lessons here: "
                                     f"{', '.join(held) or 'none'}){did_you_mean(lesson, held)}")

    @property
    def shapes_source(self) -> str:
        return (_PACKAGE_ROOT / "reference" / "shapes.py").read_text(encoding="utf-8")


def lesson_meant(typed: str, held: list[str]) -> str | None:
    """The lesson a name that is none means, as people write them: `Lesson3`, `lesson03`,
    `lesson 3`, `L3`, `3`. Only suggested: the gradebook and the reports key by the name."""
    plain = re.fullmatch(r"(?:lesson|l)?0*(\d+)", re.sub(r"[\s_-]", "", typed.casefold()))
    meant = f"lesson{plain.group(1)}" if plain else None
    return meant if meant in held and meant != typed else None


def did_you_mean(typed: str, held: list[str]) -> str:
    """The end of an error about a lesson that is none: "; did you mean lessonN?", or ""."""
    meant = lesson_meant(typed, held)
    return f"; did you mean {meant}?" if meant else ""


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
            found = ("is a file" if root.exists() and not root.is_dir() else
                     "no such folder" if not root.exists() else "no rubrics/ inside")
            raise InputError(str(root), f"not a course folder ({found}): --course names the folder "
                                        "holding rubrics/ and assignments/")
        return Course(root.resolve())
    here = Path(os.getcwd()).resolve()
    for folder in (here, *here.parents, _PACKAGE_ROOT):
        if (folder / "rubrics").is_dir() and (folder / "assignments").is_dir():
            return Course(folder)
    # Installed without `-e`, the package sits in site-packages, far from the course.
    raise InputError(str(here), "no course folder here or above (one holding assignments/ and "
                                "rubrics/): run grader inside the course, or pass --course DIR")


# ---- a course file's values, each with its place ---------------------------------------------
_MISSING = object()


@dataclass(frozen=True)
class Field:
    """A value read from a course file, with the file and its place in it, for the files
    the lessons take apart by hand (the worker file, the hidden families). Every problem
    with it is one InputError in the rubric's form, in YAML's words:
        families.yaml: line 9: families[0].instances: expected an integer >= 1; got 0
    never a KeyError or an AttributeError from deep inside the grader."""
    file: Path
    parts: tuple = ()
    value: Any = None

    def problem(self, message: str) -> InputError:
        from reference.yaml_words import dotted, line_of
        try:
            line = line_of(self.file.read_text(encoding="utf-8"), list(self.parts))
        except (OSError, UnicodeDecodeError):
            line = None
        return InputError(str(self.file), f"{f'line {line}: ' if line else ''}{dotted(self.parts)}: {message}")

    def _wrong(self, expected: str) -> InputError:
        from reference.yaml_words import got
        return self.problem(f"expected {expected}; got {got(self.value)}")

    def mapping(self, known: tuple[str, ...] | None = None) -> Mapping:
        """The value as a mapping (nothing is an empty one); with ``known``, a key outside
        it is a typo, refused rather than ignored."""
        value = {} if self.value is None else self.value
        if not isinstance(value, Mapping):
            raise self._wrong("a mapping")
        if known is not None:
            extra = [k for k in value if k not in known]
            if extra:
                from reference.yaml_words import short
                raise self.at(extra[0]).problem(f"unknown key {short(extra[0])} (known here: "
                                                f"{', '.join(known)})")
        return value

    def at(self, key, default=_MISSING) -> "Field":
        """The field under ``key`` of this mapping (or index of this list); a missing one is
        ``default``, or without one a problem."""
        container = self.value if isinstance(self.value, (list, tuple)) else self.mapping()
        if isinstance(container, Mapping) and key not in container:
            if default is _MISSING:
                raise Field(self.file, (*self.parts, key)).problem("missing key (required)")
            return Field(self.file, (*self.parts, key), default)
        return Field(self.file, (*self.parts, key), container[key])

    def items(self, at_least: int = 0) -> list["Field"]:
        """Each element of a list (nothing is an empty list), of which there must be
        ``at_least``."""
        if self.value is None and not at_least:
            return []
        if not isinstance(self.value, list):
            raise self._wrong("a list")
        if len(self.value) < at_least:
            raise self.problem(f"expected a list of at least {at_least} item{'s' if at_least != 1 else ''}; "
                               f"got {len(self.value)}")
        return [self.at(i) for i in range(len(self.value))]

    def entries(self) -> list[tuple[str, "Field"]]:
        """(key, field) of each entry of a mapping, in the file's order."""
        return [(k, self.at(k)) for k in self.mapping()]

    def text(self) -> str:
        if not isinstance(self.value, str) or not self.value.strip():
            raise self._wrong("text")
        return self.value

    def integer(self, minimum: int | None = None) -> int:
        v = self.value
        if isinstance(v, bool) or not isinstance(v, int):
            raise self._wrong("an integer" + (f" >= {minimum}" if minimum is not None else ""))
        if minimum is not None and v < minimum:
            raise self.problem(f"expected an integer >= {minimum}; got {v}")
        return v

    def number(self) -> float:
        import math
        v = self.value
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise self._wrong("a finite number")
        return v


def read_sections(path: Path, shape: Mapping[str, str]) -> dict:
    """A course file that is a mapping of sections, each of the kind ``shape`` names:
    "records" a list of at least one mapping, "list" a list of at least one item, "mapping"
    a mapping (absent: an empty one). A section missing, empty or of another kind, or a key
    the file does not have, is one InputError naming the file, the line and the field: an
    emptied probe file would otherwise grade on nothing, and cost every learner the points."""
    top = read_field(path)
    top.mapping(known=tuple(shape))
    sections = {}
    for key, kind in shape.items():
        if kind == "mapping":
            sections[key] = dict(top.at(key, None).mapping())
            continue
        items = top.at(key).items(at_least=1)
        if kind == "records":
            for item in items:
                item.mapping()
        sections[key] = [item.value for item in items]
    return sections


def read_field(path: Path) -> Field:
    """A course file's top level as a Field (read_yaml's checks first)."""
    return Field(Path(path), (), read_yaml(path))

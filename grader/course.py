"""Where the course lives: rubrics, assignments and the shapes module a submission may import."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from grader.errors import InputError

_PACKAGE_ROOT = Path(__file__).resolve().parent.parent


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

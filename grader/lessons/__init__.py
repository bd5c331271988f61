"""Per-lesson grading: each module builds its cases and registers its checks."""
from importlib import import_module

LESSONS = ("lesson1", "lesson2", "lesson3", "lesson4", "lesson5", "lesson6")


def lesson_module(lesson: str):
    return import_module(f"grader.lessons.{lesson}")

"""Where the course lives, and how a course file is read (grader/engine/layout.py)."""

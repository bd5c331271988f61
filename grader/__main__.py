"""``python -m grader``: the ``grader`` command, where its script is not on PATH (a venv not
activated, or ``pip install --user`` without ~/.local/bin)."""
import sys

from grader.cli import main

if __name__ == "__main__":
    sys.exit(main())

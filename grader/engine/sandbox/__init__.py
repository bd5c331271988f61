"""Running untrusted learner code: an isolated child process (child.py, standard library
only) and the grader-side session that talks to it (session.py)."""
from grader.engine.sandbox.session import CallResult, Sandbox, SandboxError

__all__ = ["CallResult", "Sandbox", "SandboxError"]

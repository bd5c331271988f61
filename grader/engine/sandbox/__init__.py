"""Running untrusted learner code: an isolated child process (child.py, standard library
only), the grader-side session that talks to it (session.py) and what it writes to the
child and reads back (wire.py)."""
from grader.engine.sandbox.session import CallResult, Sandbox, SandboxError

__all__ = ["CallResult", "Sandbox", "SandboxError"]

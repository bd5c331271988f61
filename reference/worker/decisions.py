"""How the worker asks its policy for a decision, and what it accepts as an answer.

A policy is six plug-in decisions (reference.policy). A wrapper that could not obtain a
decision (the learner's code raised, timed out or returned junk) raises PolicyError; the
worker then records an invalid decision and takes its safe fallback, so a bad answer costs
the run's evidence, never the worker's books.
"""
from __future__ import annotations

from dataclasses import fields, is_dataclass


class PolicyError(Exception):
    """Raised by a policy wrapper when a decision could not be obtained (timeout, bad value)."""


def is_count(value) -> bool:
    """A page or token count the worker can use: a plain int in [0, 2**40)."""
    return type(value) is int and 0 <= value < 1 << 40


class Decisions:
    def _decide(self, name: str, kind: type, *args):
        """Ask the policy; None when it could not answer or answered with the wrong type."""
        try:
            value = getattr(self.policy, name)(*args)
        except PolicyError:
            return None
        if kind is tuple:
            return value if isinstance(value, tuple) else None
        return value if type(value) is kind else None



def shown(value, limit: int = 120) -> str:
    """A policy's answer for a violation's detail, bounded before it is built: a tuple of
    100,000 items is named by its size, not printed, also inside a dataclass."""
    if isinstance(value, (tuple, list)) and len(value) > 8:
        text = f"<a {type(value).__name__} of {len(value)} items>"
    elif isinstance(value, (tuple, list)):
        inner = ", ".join(shown(v, limit) for v in value)
        text = f"({inner}{',' if len(value) == 1 else ''})" if isinstance(value, tuple) else f"[{inner}]"
    elif is_dataclass(value) and not isinstance(value, type):
        text = f"{type(value).__name__}(" + ", ".join(
            f"{f.name}={shown(getattr(value, f.name), limit)}" for f in fields(value)) + ")"
    else:
        text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."

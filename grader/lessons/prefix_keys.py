"""Lesson 4's prefix_key probes: inputs that must get different keys, and one key per input.

A key that merges two scopes lets a prefix hit cross tenants; one that merges two
positions (parents or blocks) hands a request pages of another prefix. The pairs are
adversarial (scope names that hold separators, unicode look-alikes, empty scopes, parents,
blocks; drawn in grader/lessons/lesson4.py), and each distinct input is asked twice in
this process and once in a fresh one (new module state, new str hash seed), so a key that
depends on anything but its inputs shows without a worker run.
"""
from __future__ import annotations

from dataclasses import dataclass

from grader.engine.codec import persistent
from grader.engine.cases import Case
from grader.engine.checks import Answer, CheckContext, Measure, ask, check, grade_answers, not_implemented

MAX_KEY = 512             # the worker refuses a longer key (reference/worker.py: _key)

Triple = tuple  # (scope, parent_key, block_tokens): one prefix_key input


@persistent
@dataclass(frozen=True)
class KeyPair:
    """Two prefix_key inputs that must get different keys; kind names the rule."""
    kind: str             # scope | parent | block
    a: Triple
    b: Triple


def _short(text: str) -> str:
    return ascii(text) if len(text) <= 40 else f"{ascii(text[:16])[:-1]}...' ({len(text)} characters)"


def show_input(t: Triple) -> str:
    scope, parent, block = t
    tokens = ", ".join(map(str, block[:6])) + (", ..." if len(block) > 6 else "")
    return f"prefix_key({_short(scope)}, {_short(parent)}, ({tokens}{',' if len(block) == 1 else ''}))"


def key_answers(ctx: CheckContext) -> dict:
    """Every probe input -> (its case, its answers: twice in this process, once in a fresh one)."""
    pairs = ctx.family("key")
    memo = ("keys", tuple(c.name for c in pairs))
    if memo not in ctx.memo:
        seen: dict = {}
        for c in pairs:
            for t in (c.inputs.a, c.inputs.b):
                if t not in seen or c.visibility == "public":
                    seen[t] = Case("key-input", show_input(t), c.visibility, t, show_input(t))
        cases = list(seen.values())
        first = ask(ctx, "prefix_key", cases, lambda c: c.inputs, str)
        again = ask(ctx, "prefix_key", cases, lambda c: c.inputs, str)
        ctx.restart()               # a second process: new module state, new str hash seed
        other = ask(ctx, "prefix_key", cases, lambda c: c.inputs, str)
        ctx.memo[memo] = {c.inputs: (c, (x, y, z)) for c, x, y, z in zip(cases, first, again, other)}
    return ctx.memo[memo]


def _usable(a: Answer) -> str:
    if a.problem:
        return a.problem
    if not a.value:
        return "returned an empty key"
    if len(a.value) > MAX_KEY:
        return f"returned a key of {len(a.value)} characters; the worker takes at most {MAX_KEY}"
    return ""


_KIND_WORDS = {
    "scope": "two scopes share a key: a hit would cross tenants",
    "parent": "one key for two positions: the parent key must be part of the key",
    "block": "one key for two different blocks of tokens",
}


def _distinct(case: Case, keys: tuple) -> str:
    a, b = keys
    why = _usable(a) or _usable(b)
    if why:
        return why
    if a.value == b.value:
        return f"both got {a.value[:40]!r}: {_KIND_WORDS[case.inputs.kind]}"
    return ""


def _pair_measure(ctx: CheckContext, kinds: tuple, noun: str) -> Measure:
    keys = key_answers(ctx)
    pairs = [c for c in ctx.family("key") if c.inputs.kind in kinds]
    answers = [Answer(c, (keys[c.inputs.a][1][0], keys[c.inputs.b][1][0])) for c in pairs]
    stub = not_implemented([x for a in answers for x in a.value])
    if stub:
        return Measure(0.0, stub)
    return grade_answers(answers, _distinct, noun)


@check("lesson4.key_scope")
def key_scope(ctx: CheckContext, params: dict) -> Measure:
    return _pair_measure(ctx, ("scope",), "pairs of scopes")


@check("lesson4.key_position")
def key_position(ctx: CheckContext, params: dict) -> Measure:
    return _pair_measure(ctx, ("parent", "block"), "pairs of parents or blocks")


@check("lesson4.key_deterministic")
def key_deterministic(ctx: CheckContext, params: dict) -> Measure:
    keys = key_answers(ctx)

    def judge(case: Case, got) -> str:
        first, again, other = got
        why = first.problem or again.problem      # the key's length is key-position's business
        if why:
            return why
        if first.value != again.value:
            # The keys themselves are not quoted: they change from run to run, and a report
            # must not (two gradings of one file give the same report).
            return ("gave another key when asked again with the same input: a key must depend "
                    "on its inputs alone (no random salt, counter, clock or id())")
        if other.problem:
            return f"in a second process: {other.problem}"
        if other.value != first.value:
            return ("gave one key in one process and another key in a second process: str hash() "
                    "is salted per process; use hashlib or the text itself")
        return ""

    answers = [Answer(case, got) for case, got in keys.values()]
    stub = not_implemented([x for a in answers for x in a.value])
    if stub:
        return Measure(0.0, stub)
    return grade_answers(answers, judge, "inputs asked three times")

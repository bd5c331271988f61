"""Lesson 4's prefix_key probes: inputs that must get different keys, and one key per input.

A key that merges two scopes lets a prefix hit cross tenants; one that merges two
positions (parents or blocks) hands a request pages of another prefix. The pairs are
adversarial (scope names that hold separators, unicode look-alikes, empty scopes, parents,
blocks; drawn in grader/lessons/lesson4.py), and each distinct input is asked twice in
this process and once in a fresh one (new module state, new str hash seed), the last two
times in reverse order, so a key that depends on anything but its inputs (the order they
come in too) shows without a worker run.
"""
from __future__ import annotations

from dataclasses import dataclass

from grader.engine.codec import persistent
from grader.engine.cases import Case
from grader.engine.checks import (Answer, CheckContext, Measure, ask, check, constant_answer, grade_answers,
                                  not_implemented)
from grader.lessons import key_search

MAX_KEY = 512             # the worker refuses a longer key (reference/worker/prefix_cache.py: _key)

Triple = tuple  # (scope, parent_key, block_tokens): one prefix_key input


@persistent
@dataclass(frozen=True)
class KeyPair:
    """Two prefix_key inputs that must get different keys; kind names the rule."""
    kind: str             # scope | parent | block
    a: Triple
    b: Triple


def _short(text: str) -> str:
    if len(text) <= 40:
        return ascii(text)
    # The cut keeps the quote ascii() chose: a text holding ' but no " is written in ".
    head = ascii(text[:16])
    return f"{head[:-1]}...{head[-1]} ({len(text)} characters)"


def show_input(t: Triple) -> str:
    scope, parent, block = t
    tokens = ", ".join(map(str, block[:6])) + (", ..." if len(block) > 6 else "")
    return f"prefix_key({_short(scope)}, {_short(parent)}, ({tokens}{',' if len(block) == 1 else ''}))"


def difference(a: Triple, b: Triple) -> str:
    """Where two inputs differ, when show_input writes them alike (a long parent or scope
    cut short, a block past its sixth token): " (the blocks differ only in token 9: ...)"."""
    if a == b or show_input(a) != show_input(b):
        return ""
    field, x, y = next(f for f in zip(("scope", "parent key", "block"), a, b) if f[1] != f[2])
    places = [i for i, (u, v) in enumerate(zip(x, y)) if u != v]
    if len(x) != len(y) or not places:
        return f" (the {field}s are {len(x)} and {len(y)} {'tokens' if field == 'block' else 'characters'} long)"
    i, what = places[0], "token" if field == "block" else "character"
    only = "only " if len(places) == 1 else "first "
    return f" (the {field}s differ {only}in {what} {i}: {x[i]!a} against {y[i]!a})"


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
        # Asked again in reverse order, here and in a second process (new module state, new
        # str hash seed, clocks that read later, other process ids): a key that numbers
        # inputs as it meets them is the same in a process asked in one order, and in a
        # second process asked in that order too, but not in a worker process that meets
        # the blocks in another.
        again = ask(ctx, "prefix_key", cases[::-1], lambda c: c.inputs, str)[::-1]
        ctx.restart()
        other = ask(ctx, "prefix_key", cases[::-1], lambda c: c.inputs, str)[::-1]
        ctx.memo[memo] = {c.inputs: (c, (x, y, z)) for c, x, y, z in zip(cases, first, again, other)}
    return ctx.memo[memo]


def _ask_inputs(ctx: CheckContext, triples: list) -> list[Answer]:
    cases = [Case("key-search", show_input(t), "public", t, show_input(t)) for t in triples]
    return ask(ctx, "prefix_key", cases, lambda c: c.inputs, str)


@dataclass(frozen=True)
class Searched:
    """What the search shows: the first collision per kind, {kind: (input, other input,
    their key)}, why the keys seen can take too few values ("" when they can), and why one
    scope's keys can (a long scope part beside a short position part: "" when they cannot)."""
    collisions: dict
    small_space: str
    small_in_scope: str = ""


def searched(ctx: CheckContext) -> Searched:
    """The search against the learner's own encoding (key_search), judged on the probes'
    answers and the search's together."""
    keys = key_answers(ctx)
    memo = ("key-search", tuple(keys))
    if memo not in ctx.memo:
        if not_implemented([x for _, got in keys.values() for x in got]):
            ctx.memo[memo] = Searched({}, "")
            return ctx.memo[memo]
        scouts = _ask_inputs(ctx, list(key_search.SCOUTS))
        triples = key_search.inputs([a.value for a in scouts if not _usable(a)])
        asked = list(zip(key_search.SCOUTS, scouts)) + list(zip(triples, _ask_inputs(ctx, triples)))
        # The search runs in the second process. A probe's key joins it only when it was the
        # same in both: a key that differs by process is key-deterministic's mistake, and a
        # key numbered by a counter in each process would share numbers across the two.
        asked += [(t, got[0]) for t, (_, got) in keys.items()
                  if not got[0].problem and got[0].value == got[1].value == got[2].value]
        usable = [(t, a.value) for t, a in asked if not _usable(a)]
        space = _space_words([k for _, k in usable])
        small = "" if not space else (
            f"{space}, so among the blocks a busy cache holds two inputs share a key by chance, two "
            f"scopes among them (a key needs at least {key_search.MIN_BITS} bits)")
        ctx.memo[memo] = Searched(key_search.collisions(usable), small, "" if small else _small_in_scope(usable))
    return ctx.memo[memo]


def _space_words(keys: list) -> str:
    """'every key is at most 8 characters of hexadecimal: about 2^32 keys at most' when the
    keys can take fewer than 2^MIN_BITS values, else ""."""
    kept, shared = key_search.varying(keys)
    space = key_search.space_of(kept)
    if space is None:
        return ""
    beside = f"beside the {shared} characters every key holds alike, " if shared else ""
    longest = max(map(len, kept))
    if space[1] < longest:
        # One length class of the keys (the inputs that get a short key), the rest longer.
        n = len({k for k in kept if len(k) == space[1]})
        return (f"{beside}{n} different keys of the inputs asked are {space[1]} characters of {space[0]} "
                f"(others are up to {longest} characters): inputs that get keys this short share "
                f"about 2^{int(space[2])} keys at most, however long the others are")
    return f"{beside}every key is at most {space[1]} characters of {space[0]}: about 2^{int(space[2])} keys at most"


def _small_in_scope(usable: list) -> str:
    """Why the keys of one scope can take too few values, though keys of all scopes together
    can take enough ("" when no scope's can): a long digest of the scope beside a checksum
    of the position keeps tenants apart and lets two blocks of one tenant share a key by
    chance. Judged on each scope the search asked often enough to show what its keys share,
    the most asked first."""
    by_scope: dict = {}
    for (scope, _, _), key in usable:
        by_scope.setdefault(scope, set()).add(key)
    for scope, keys in sorted(by_scope.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        if len(keys) < key_search.SHARED_AFTER:
            break
        space = _space_words(sorted(keys))
        if space:
            return (f"for one scope ({_short(scope)}), {space}, so among one tenant's blocks two positions "
                    f"share a key by chance (what tells a scope's blocks apart needs at least "
                    f"{key_search.MIN_BITS} bits)")
    return ""


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
    "parent": "one key for two positions: the parent key must be in the key, kept apart from the scope and the tokens",
    "block": "one key for two different blocks of tokens",
}


def _distinct(case: Case, keys: tuple) -> str:
    a, b = keys
    why = _usable(a) or _usable(b)
    if why:
        return why
    if a.value == b.value:
        return f"both got {a.value[:40]!r}: {_KIND_WORDS[case.inputs.kind]}{difference(case.inputs.a, case.inputs.b)}"
    return ""


def _pair_measure(ctx: CheckContext, kinds: tuple, noun: str) -> Measure:
    keys = key_answers(ctx)
    pairs = [c for c in ctx.family("key") if c.inputs.kind in kinds]
    answers = [Answer(c, (keys[c.inputs.a][1][0], keys[c.inputs.b][1][0])) for c in pairs]
    stub = not_implemented([x for a in answers for x in a.value])
    if stub:
        return Measure(0.0, stub)
    measure = grade_answers(answers, _distinct, noun)
    found = searched(ctx)
    hit = next((found.collisions[k] for k in ("scope", "parent", "block")
                if k in kinds and k in found.collisions), None)
    if hit is None:
        # A key space too small collides by chance: two scopes are as likely as two positions,
        # and the scope criterion is the one a shared page across tenants breaks. A scope's
        # own keys too few, with enough keys in all, can collide on positions alone.
        small = found.small_space if "scope" in kinds else found.small_in_scope
        if not small:
            return measure
        if measure.value < 1.0:
            return Measure(0.0, f"{measure.feedback}; and {small}", measure.evidence)
        return Measure(0.0, small, ("key-space",))
    a, b, key = hit
    line = (f"the grader's search against your encoding found two inputs with one key: {show_input(a)} "
            f"and {show_input(b)} both got {key[:40]!r}: {_KIND_WORDS[key_search.kind(a, b)]}{difference(a, b)}")
    if measure.value < 1.0:
        if show_input(a) in measure.feedback and show_input(b) in measure.feedback:
            return measure          # the search found the very pair the probes already name
        return Measure(measure.value, f"{measure.feedback}; and {line}", measure.evidence)
    return Measure(0.0, line, ("search",))


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
            # The keys are not quoted: they change from run to run, and a report must not.
            return ("gave one key in one process and another key in a second process: a key "
                    "must be the same in every process, whenever it starts (str hash(), for one, "
                    "is salted per process; the process id and the clock differ in a worker "
                    "started later; and a number given to each input as it is met depends on "
                    "the order inputs come in)")
        return ""

    answers = [Answer(case, got) for case, got in keys.values()]
    stub = not_implemented([x for a in answers for x in a.value])
    if stub:
        return Measure(0.0, stub)
    # One key for every input is deterministic without being a key of anything.
    constant = constant_answer([Answer(case, got[0].value, got[0].problem) for case, got in keys.values()],
                               "prefix_key")
    if constant:
        return Measure(0.0, constant)
    return grade_answers(answers, judge, "inputs asked three times")

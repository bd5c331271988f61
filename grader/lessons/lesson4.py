"""Lesson 4, cancellation and ownership: the state machine's table, prefix keys, publishing.

Three kinds of evidence:
- the transition table: on_event is asked for all 5 x 5 x 2 (state, event, in-flight)
  entries, then model-checked against the worker's side of a request's life (which events
  can come next, and whether a launched step pins the pages), so every invariant is
  checked on every event sequence the worker can produce, and on every entry;
- probes: prefix_key on adversarial pairs that must get different keys (scope names that
  hold separators, unicode look-alikes, empty scopes, parents, blocks), each input asked
  twice in one process and once in a second process (same key every time); publishable on
  offered pages as the worker builds them;
- worker runs: the learner's on_event, prefix_key and publishable in the reference worker
  on cancellation-heavy, prefix-sharing, multi-scope scenarios (public:
  assignments/lesson4/public/*.scenario.yaml; hidden: grader/instructor/families/lesson4.yaml). The
  worker records use-after-free, leaks, double releases, cross-scope hits and poisoned
  publishes; records give each cancelled request's fence and release time; the oracle is
  the reference policy on the same scenario (prefix hits).

This module builds the cases (public and hidden); each kind of evidence is judged in a
module of its own beside it, which importing this one registers: transition_table,
prefix_keys, publishing, cancellation_runs.
"""
from __future__ import annotations

import unicodedata

import numpy as np

from grader.engine.cases import Case
from grader.engine.layout import read_sections
from reference.yaml_words import reading_problem
from grader.engine.errors import InputError
# Importing the judges registers their checks (the cases below use two of them).
from grader.lessons import cancellation_runs, prefix_keys, publishing, transition_table  # noqa: F401
from grader.lessons.prefix_keys import KeyPair, Triple, show_input
from grader.lessons.publishing import offered_pages
from grader.course.scenario import hidden_scenarios, public_scenarios
from grader.engine.secret import derive_seed
from reference.sizing import pages_for

LESSON = "lesson4"
VOCAB = 32000             # token ids are ints in [0, VOCAB), as the workloads draw them


# ---- public cases -----------------------------------------------------------------------
def _pair_case(pair: KeyPair, name: str, visibility: str, note: str) -> Case:
    label = f"{show_input(pair.a)} vs {show_input(pair.b)}" + (f" ({note})" if note else "")
    return Case("key", name, visibility, pair, label)


def forgeries(sep: str, a: str, b: str, c: str, block: tuple) -> list[KeyPair]:
    """Pairs a key joined by ``sep`` cannot tell apart (see probes.yaml)."""
    return [KeyPair("scope", (a + sep + b, c, block), (a, b + sep + c, block)),
            KeyPair("scope", (b + sep + c, a, block), (c, a + sep + b, block)),
            KeyPair("scope", (a + sep + str(block[0]), c, block[1:]), (a, c, block))]


def _triple(value, where: str) -> Triple:
    try:
        scope, parent, block = value
        block = tuple(int(x) for x in block)
    except (TypeError, ValueError):
        raise InputError(where, "expected [scope, parent_key, [tokens...]]") from None
    if not (isinstance(scope, str) and isinstance(parent, str)) or not block:
        raise InputError(where, "scope and parent_key are strings; the block has tokens")
    return scope, parent, block


def _publish_case(pages: tuple, name: str, visibility: str, label: str) -> Case:
    return Case("publish", name, visibility, pages, label)


def _show_pages(pt: int, prompt: int, written: int, first: int, published) -> str:
    extra = f", pages {sorted(published)} already published" if published else ""
    hits = f", first offered page {first}" if first else ""
    return f"{prompt}-token prompt, {pt}-token pages, {written} tokens written{hits}{extra}"


def _read_probes(course) -> dict:
    path = course.assignment(LESSON) / "probes.yaml"
    return read_sections(path, {"prefix_key": "mapping", "publishable": "records"})


def _listed(value, where: str, kind=None) -> list:
    """A probe field that is a list (of `kind`), or one line naming it."""
    if value is None:
        return []
    if not isinstance(value, list) or (kind is not None and not all(isinstance(v, kind) for v in value)):
        raise InputError(where, f"expected a list{' of ' + kind.__name__ + 's' if kind else ''}, "
                                f"got {type(value).__name__}")
    return value


def public_probes(course) -> list[Case]:
    data, where = _read_probes(course), str(course.assignment(LESSON) / "probes.yaml")
    keys = data.get("prefix_key") or {}
    if not isinstance(keys, dict):
        raise InputError(f"{where}: prefix_key", "expected a mapping (block, separators, pairs)")
    block = _triple(["", "", keys.get("block") or [7, 8, 9]], f"{where}: prefix_key.block")[2]
    if len(block) < 2:
        raise InputError(f"{where}: prefix_key.block", "the forging pairs need at least 2 tokens")
    cases = []
    for s in _listed(keys.get("separators"), f"{where}: prefix_key.separators", str):
        for j, pair in enumerate(forgeries(str(s), "a", "b", "c", block)):
            cases.append(_pair_case(pair, f"separator {s!a} #{j}", "public",
                                    f"a key joined by {s!a}" if s else "a key joined without separator"))
    for i, p in enumerate(_listed(keys.get("pairs"), f"{where}: prefix_key.pairs")):
        at = f"{where}: prefix_key.pairs[{i}]"
        if not isinstance(p, dict) or p.get("kind") not in ("scope", "parent", "block"):
            raise InputError(at, "a pair has kind (scope, parent or block), a and b")
        pair = KeyPair(p["kind"], _triple(p.get("a"), f"{at}.a"), _triple(p.get("b"), f"{at}.b"))
        cases.append(_pair_case(pair, f"pair {i}", "public", str(p.get("note", ""))))
    for i, p in enumerate(_listed(data.get("publishable"), f"{where}: publishable")):
        at = f"{where}: publishable[{i}]"
        try:
            pt, prompt, written = int(p["page_tokens"]), int(p["prompt_tokens"]), int(p["written_tokens"])
            first, published = int(p.get("first", 0)), frozenset(int(x) for x in p.get("published", ()))
        except (KeyError, TypeError, ValueError) as e:
            raise InputError(at, f"bad probe: {reading_problem(e)}") from None
        if not (pt >= 1 and 1 <= prompt and 0 <= written <= prompt and 0 <= first < pages_for(prompt, pt)):
            raise InputError(at, "need page_tokens >= 1, 0 <= written <= prompt, first < the prompt's pages")
        cases.append(_publish_case(offered_pages(pt, prompt, written, first, published),
                                   f"publish {i}", "public",
                                   f"{p.get('note', '')} ({_show_pages(pt, prompt, written, first, published)})"))
    return cases


def public_cases(course) -> list[Case]:
    return public_scenarios(course, LESSON) + public_probes(course)


# ---- hidden cases -----------------------------------------------------------------------
# Hidden names mix letters with everything a scope name may hold.
_ALPHABET = list("abcdefxyzAZ019 _-.:|/,;#@=\\\t\n\x00\x1f") + [
    "\u00e9", "e\u0301", "\u00df", "\u200b", "\u00a0", "\u2063", "\u682a", "\U0001f642", "\u05d0"]
_SEPARATORS = ["|", ":", "/", ",", " ", "\n", "\t", "\x00", "\x1f", "", "||", "::", "->", "\u00b7",
               "\u2063", "%", "=", "&", "+", "\r\n", "\\", "'", '"', "}{", "), ("]


def _pick(g: np.random.Generator, texts: list[str]) -> str:
    # By index: g.choice makes a numpy string array of them, which drops a trailing NUL
    # ("\x00" came back as "", so no hidden scope held one and a long scope could fall
    # short of 512 characters).
    return texts[int(g.integers(0, len(texts)))]


def _name(g: np.random.Generator, lo: int = 1, hi: int = 8) -> str:
    return "".join(_pick(g, _ALPHABET) for _ in range(int(g.integers(lo, hi + 1))))


def _block(g: np.random.Generator, lo: int = 2, hi: int = 16) -> tuple:
    return tuple(int(x) for x in g.integers(0, VOCAB, size=int(g.integers(lo, hi + 1))))


def _hex(g: np.random.Generator, lo: int = 4, hi: int = 32) -> str:
    return "".join("0123456789abcdef"[int(x)] for x in g.integers(0, 16, size=int(g.integers(lo, hi + 1))))


def _split(g: np.random.Generator) -> tuple[tuple, tuple]:
    """Two token pairs whose decimal texts join to the same digits: (12, 345) and (123, 45)."""
    while True:
        digits = str(int(g.integers(1000, VOCAB)))
        cuts = [i for i in range(1, len(digits)) if digits[i] != "0"]
        if len(cuts) >= 2:
            i, j = (int(x) for x in g.choice(cuts, size=2, replace=False))
            return ((int(digits[:i]), int(digits[i:])), (int(digits[:j]), int(digits[j:])))


def _look_alike(g: np.random.Generator, name: str) -> str:
    """Another scope a careless key may merge with ``name``."""
    kind = int(g.integers(0, 5))
    if kind == 0:
        other = unicodedata.normalize("NFD" if unicodedata.is_normalized("NFC", name) else "NFC", name)
        if other != name:
            return other
    if kind == 1 and name.lower() != name.upper():
        return name.swapcase()
    if kind == 2:
        return name + _pick(g, [" ", "\u200b", "\n", "\x00"])
    return _pick(g, [" ", "\u200b"]) + name


def hidden_probes(secret: bytes) -> list[Case]:
    g = np.random.Generator(np.random.PCG64(derive_seed(secret, LESSON, "probes")))
    cases = []

    def add(pair: KeyPair, note: str) -> None:
        if pair.a != pair.b:
            cases.append(_pair_case(pair, f"key#{len(cases)}", "hidden", note))

    for sep in _SEPARATORS:
        for pair in forgeries(sep, _name(g), _name(g), _name(g), _block(g)):
            add(pair, "hidden scope names that hold a separator")
    for _ in range(12):
        scope, other, block = _name(g), _name(g), _block(g)
        add(KeyPair("scope", ("", scope, block), (scope, "", block)), "hidden empty scope")
        add(KeyPair("scope", (scope, other, block), (other, scope, block)), "hidden swapped scope and parent")
        base = "caf\u00e9" + scope if g.random() < 0.4 else scope
        add(KeyPair("scope", (base, "", block), (_look_alike(g, base), "", block)), "hidden look-alike scopes")
        parent = _hex(g)
        add(KeyPair("parent", (scope, "", block), (scope, parent, block)), "hidden parents")
        add(KeyPair("parent", (scope, parent, block), (scope, parent[:-1] + ("0" if parent[-1] != "0" else "1"), block)),
            "hidden parents")
        x, y = _split(g)
        add(KeyPair("block", (scope, parent, block[:-2] + x), (scope, parent, block[:-2] + y)),
            "hidden blocks whose token texts join alike")
        changed = block[:-1] + ((block[-1] + 1) % VOCAB,)
        add(KeyPair("block", (scope, parent, block), (scope, parent, changed)), "hidden blocks")
    scope, block, long = _name(g), _block(g), _hex(g, 513, 700)
    add(KeyPair("parent", (scope, long, block), (scope, long[1:], block)), "hidden long parents")
    for i in range(40):
        pt = int(g.choice([1, 4, 16, 16, 16, 32]))
        prompt = int(g.integers(1, 20 * pt + 1))
        n = pages_for(prompt, pt)
        first = int(g.integers(0, n)) if g.random() < 0.4 else 0
        written = int(g.choice([prompt, int(g.integers(0, prompt + 1)), first * pt + int(g.integers(0, pt))]))
        written = min(prompt, max(written, min(prompt, first * pt)))
        published = frozenset(int(x) for x in range(first, n) if g.random() < 0.15)
        cases.append(_publish_case(offered_pages(pt, prompt, written, first, published), f"publish#{i}",
                                   "hidden", f"hidden offer: {_show_pages(pt, prompt, written, first, published)}"))
    # Drawn after the rest, so the draws above stay what they were: scopes one character
    # apart, which a lossy mapping of the name (a transcoding, a sanitiser) merges, and long
    # scopes, which a key that cuts them merges and one that embeds them outgrows 512 with.
    for _ in range(8):
        name, block = _name(g, 2, 8), _block(g)
        i = int(g.integers(0, len(name)))
        add(KeyPair("scope", (name, "", block), (name[:i] + _pick(g, _ALPHABET) + name[i + 1:], "", block)),
            "hidden scopes one character apart")
    long, block = _name(g, 513, 600), _block(g)
    add(KeyPair("scope", (long, "", block), (long[:-1] + ("y" if long[-1] != "y" else "z"), "", block)),
        "hidden long scopes")
    return cases


def hidden_cases(secret: bytes, course=None) -> list[Case]:
    return hidden_scenarios(course, LESSON, secret) + hidden_probes(secret)

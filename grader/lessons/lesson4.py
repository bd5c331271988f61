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
  assignments/lesson4/public/*.scenario.yaml; hidden: grader/families/lesson4.yaml). The
  worker records use-after-free, leaks, double releases, cross-scope hits and poisoned
  publishes; records give each cancelled request's fence and release time; the oracle is
  the reference policy on the same scenario (prefix hits).
"""
from __future__ import annotations

import unicodedata
from collections import deque
from dataclasses import dataclass
from itertools import product
from pathlib import Path

import numpy as np
import yaml

from grader.cases import Case
from grader.checks import Answer, CheckContext, Measure, ask, check, grade_answers
from grader.errors import InputError
from grader.learner_policy import CallLog, learner_policy
from grader.memo import remember
from grader.scenario import hidden_scenarios, public_scenarios
from grader.secret import derive_seed
from reference.policy import reference_policy
from reference.records import Run
from reference.shapes import ACTIONS, EVENTS, STATES, PageInfo, Transition
from reference.solutions.lesson1 import pages_for

LESSON = "lesson4"
FUNCTIONS = ("on_event", "prefix_key", "publishable")
STOP, NOTIFY, RELEASE = ACTIONS
MAX_KEY = 512             # the worker refuses a longer key (reference/worker.py: _key)
HIT_SHARE = 0.95          # prefix hits a correct key reaches, as a share of the oracle's
VOCAB = 32000             # token ids are ints in [0, VOCAB), as the workloads draw them


# ---- cases ------------------------------------------------------------------------------
Triple = tuple  # (scope, parent_key, block_tokens): one prefix_key input


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


def offered_pages(page_tokens: int, prompt_tokens: int, written_tokens: int, first: int = 0,
                  published: frozenset = frozenset()) -> tuple[PageInfo, ...]:
    """One request's prompt pages as the worker offers them to publishable: from ``first``
    (the pages before were prefix hits) through the first page not fully written
    (reference/worker.py: _publish). ``published`` marks pages already in the cache, which
    the contract says to leave out."""
    pt = page_tokens
    end = min(pages_for(prompt_tokens, pt), written_tokens // pt + 1)
    return tuple(PageInfo(i, min(pt, prompt_tokens - i * pt), pt,
                          max(0, min(pt, written_tokens - i * pt)), i in published)
                 for i in range(first, max(end, first + 1)))


def may_publish(p: PageInfo) -> bool:
    """Full of prompt tokens, every slot written by a completed step, not yet in the cache."""
    return p.prompt_tokens == p.page_tokens and p.written_tokens >= p.page_tokens and not p.published


def _publish_case(pages: tuple, name: str, visibility: str, label: str) -> Case:
    return Case("publish", name, visibility, pages, label)


def _show_pages(pt: int, prompt: int, written: int, first: int, published) -> str:
    extra = f", pages {sorted(published)} already published" if published else ""
    hits = f", first offered page {first}" if first else ""
    return f"{prompt}-token prompt, {pt}-token pages, {written} tokens written{hits}{extra}"


def _read_probes(course) -> dict:
    path = course.assignment(LESSON) / "probes.yaml"
    try:
        return yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as e:
        raise InputError(str(path), f"cannot read the public probes: {e}") from None


def public_probes(course) -> list[Case]:
    data, where = _read_probes(course), str(course.assignment(LESSON) / "probes.yaml")
    keys = data.get("prefix_key") or {}
    block = _triple(["", "", keys.get("block") or [7, 8, 9]], f"{where}: prefix_key.block")[2]
    if len(block) < 2:
        raise InputError(f"{where}: prefix_key.block", "the forging pairs need at least 2 tokens")
    cases = []
    for s in keys.get("separators") or []:
        for j, pair in enumerate(forgeries(str(s), "a", "b", "c", block)):
            cases.append(_pair_case(pair, f"separator {s!a} #{j}", "public",
                                    f"a key joined by {s!a}" if s else "a key joined without separator"))
    for i, p in enumerate(keys.get("pairs") or []):
        at = f"{where}: prefix_key.pairs[{i}]"
        if not isinstance(p, dict) or p.get("kind") not in ("scope", "parent", "block"):
            raise InputError(at, "a pair has kind (scope, parent or block), a and b")
        pair = KeyPair(p["kind"], _triple(p.get("a"), f"{at}.a"), _triple(p.get("b"), f"{at}.b"))
        cases.append(_pair_case(pair, f"pair {i}", "public", str(p.get("note", ""))))
    for i, p in enumerate(data.get("publishable") or []):
        at = f"{where}: publishable[{i}]"
        try:
            pt, prompt, written = int(p["page_tokens"]), int(p["prompt_tokens"]), int(p["written_tokens"])
            first, published = int(p.get("first", 0)), frozenset(int(x) for x in p.get("published", ()))
        except (KeyError, TypeError, ValueError) as e:
            raise InputError(at, f"bad probe ({e!r})") from None
        if not (pt >= 1 and 1 <= prompt and 0 <= written <= prompt and 0 <= first < pages_for(prompt, pt)):
            raise InputError(at, "need page_tokens >= 1, 0 <= written <= prompt, first < the prompt's pages")
        cases.append(_publish_case(offered_pages(pt, prompt, written, first, published),
                                   f"publish {i}", "public",
                                   f"{p.get('note', '')} ({_show_pages(pt, prompt, written, first, published)})"))
    return cases


def public_cases(course) -> list[Case]:
    return public_scenarios(course, LESSON) + public_probes(course)


# Hidden names mix letters with everything a scope name may hold.
_ALPHABET = list("abcdefxyzAZ019 _-.:|/,;#@=\\\t\n\x00\x1f") + [
    "\u00e9", "e\u0301", "\u00df", "\u200b", "\u00a0", "\u2063", "\u682a", "\U0001f642", "\u05d0"]
_SEPARATORS = ["|", ":", "/", ",", " ", "\n", "\t", "\x00", "\x1f", "", "||", "::", "->", "\u00b7",
               "\u2063", "%", "=", "&", "+", "\r\n", "\\", "'", '"', "}{", "), ("]


def _name(g: np.random.Generator, lo: int = 1, hi: int = 8) -> str:
    return "".join(str(g.choice(_ALPHABET)) for _ in range(int(g.integers(lo, hi + 1))))


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
        return name + str(g.choice([" ", "\u200b", "\n", "\x00"]))
    return str(g.choice([" ", "\u200b"])) + name


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
    return cases


def hidden_cases(secret: bytes, course=None) -> list[Case]:
    return hidden_scenarios(course, LESSON, secret) + hidden_probes(secret)


def _not_implemented(answers: list[Answer]) -> str:
    problems = {a.problem for a in answers}
    if answers and len(problems) == 1 and "not implemented" in next(iter(problems)):
        return next(iter(problems))
    return ""


# ---- the transition table: asked once, model-checked ------------------------------------
TABLE_KEYS = tuple(product(STATES, EVENTS, (False, True)))
HOLDING = ("admitted", "running", "cancelling")      # states whose request holds pages
SERVED = ("waiting", "admitted", "running")          # states the scheduler serves


def show_entry(state: str, event: str, in_flight: bool, tr: Transition) -> str:
    acts = f" + {', '.join(tr.actions)}" if tr.actions else ""
    return f"on_event({state!r}, {event!r}, {in_flight}) -> {tr.next_state!r}{acts}"


def table_answers(ctx: CheckContext) -> tuple[dict, str]:
    """The learner's table {(state, event, in_flight): Transition}, or why it is unusable."""
    if "table" not in ctx.memo:
        cases = [Case("table", f"on_event{k}", "public", k) for k in TABLE_KEYS]
        answers = ask(ctx, "on_event", cases, lambda c: c.inputs, Transition)
        table, problem = {}, _not_implemented(answers)
        for a in answers:
            why = a.problem
            if not why and a.value.next_state not in STATES:
                why = f"next_state {a.value.next_state!r} is not one of {', '.join(STATES)}"
            if not why and any(x not in ACTIONS for x in a.value.actions):
                why = f"actions {a.value.actions!r}: each must be one of {', '.join(ACTIONS)}"
            if why and not problem:
                problem = f"on_event{a.case.inputs}: {why}; every entry of the table must be a valid Transition"
            if not why:
                table[a.case.inputs] = a.value
        ctx.memo["table"] = (table, problem)
    return ctx.memo["table"]


# The worker's side of a request's life: in each phase, which events can come, with which
# in-flight flag, and the phase after. After a cancel or finish (the last four), the worker
# fires step_completed only while the state machine says "cancelling".
FLOW = {
    "queued": (("admit", False, "fresh"), ("cancel", False, "gone")),
    "fresh": (("step_launched", True, "pinned"), ("cancel", False, "cancelled")),
    "pinned": (("step_completed", False, "served"), ("cancel", True, "cancelled_pinned")),
    "served": (("step_launched", True, "pinned"), ("step_completed", False, "served"),
               ("finished", False, "ended"), ("cancel", False, "cancelled")),
    "cancelled_pinned": (("step_completed", False, "cancelled"),),
    "cancelled": (("step_completed", False, "cancelled"),),
    "ended": (("step_completed", False, "ended"),),
    "gone": (("step_completed", False, "gone"),),
}
PINNED = ("pinned", "cancelled_pinned")
LIVE = ("fresh", "served")
PAST_FENCE = ("cancelled", "ended")                 # over, and no step pins the pages
OVER = ("cancelled_pinned", "cancelled", "ended", "gone")
# Where the model starts: a new request, and (for a table that loses track of its state)
# each state the worker can cancel or finish a request in, with that first event.
STARTS = ((("waiting", "queued"), None), (("admitted", "fresh"), "cancel"),
          (("admitted", "pinned"), "cancel"), (("running", "pinned"), "cancel"),
          (("running", "served"), "cancel"), (("running", "served"), "finished"))


@dataclass(frozen=True)
class _Config:
    state: str
    phase: str
    released: bool = False
    cancelled: bool = False


class TableFaults:
    """What the table breaks, per invariant, each with the event path that shows it."""
    RULES = ("pinned", "stop", "reclaim", "once", "terminal")

    def __init__(self, table: dict):
        self.table = table
        self.found: dict[str, dict[str, None]] = {r: {} for r in self.RULES}
        seen: set = set()
        self._explore(STARTS[:1], seen)    # the worker's own event paths first: the clearest evidence
        self._explore(STARTS[1:], seen)
        self._direct()

    def add(self, rule: str, path: list, why: str) -> None:
        *before, last = path
        prefix = ""
        if before:
            steps = ", ".join(f"{e} -> {tr.next_state!r}" + (f" + {', '.join(tr.actions)}" if tr.actions else "")
                              for _, e, _, tr in before)
            prefix = f"from {before[0][0]!r}: {steps}; then "
        self.found[rule].setdefault(f"{prefix}{show_entry(*last)}: {why}", None)

    def _direct(self) -> None:
        t = self.table
        for (s, e, f), tr in t.items():
            if s == "done" and (tr.next_state != "done" or tr.actions):
                self.add("terminal", [(s, e, f, tr)], "a done request must stay done with no action")
            if f and s in HOLDING and RELEASE in tr.actions:
                self.add("pinned", [(s, e, f, tr)], "releases pages while a step still pins them")
        for s, f in product(SERVED, (False, True)):
            self._cancel_rules([(s, "cancel", f, t[s, "cancel", f])])

    def _cancel_rules(self, path: list) -> None:
        tr = path[-1][3]
        if STOP not in tr.actions:
            self.add("stop", path, "does not stop scheduling: the cancelled request keeps its place "
                                   "in the queue or the batch")
        n = tr.actions.count(NOTIFY)
        if n != 1:
            self.add("stop", path, "does not notify the client at once" if n == 0 else
                     f"notifies the client {n} times")
        if tr.next_state not in ("cancelling", "done"):
            self.add("stop", path, f"leaves a cancelled request in {tr.next_state!r}, a state "
                                   "the scheduler serves")

    def _after_fence(self, state: str, phase: str) -> str:
        """Lazy or leaked: follow the step completions that still come after the fence."""
        for k in range(1, 9):
            if state != "cancelling":
                break
            tr = self.table[state, "step_completed", False]
            if RELEASE in tr.actions:
                return (f"the pages come back only {k} step completion{'s' if k > 1 else ''} "
                        "after the fence (lazy reclamation: they sit idle meanwhile)")
            state = tr.next_state
        what = "finished" if phase == "ended" else "cancelled"
        return f"the {what} request's pages are never released (a leak)"

    def _explore(self, starts: tuple, seen: set) -> None:
        queue = deque((_Config(*c), first, []) for c, first in starts)
        while queue:
            cfg, only, path = queue.popleft()
            if cfg.phase in OVER and cfg.state != "cancelling":
                if cfg.phase in ("cancelled_pinned",) and not cfg.released and path:
                    self.add("reclaim", path, "no event comes after this, so the cancelled "
                                              "request's pages are never released (a leak)")
                continue
            for event, flag, phase in FLOW[cfg.phase]:
                if only and event != only:
                    continue
                tr = self.table[cfg.state, event, flag]
                step = path + [(cfg.state, event, flag, tr)]
                self._step(cfg, event, phase, tr, step)
                nxt = _Config(tr.next_state, phase, cfg.released or RELEASE in tr.actions,
                              cfg.cancelled or event == "cancel")
                if nxt not in seen:
                    seen.add(nxt)
                    queue.append((nxt, None, step))

    def _step(self, cfg: _Config, event: str, phase: str, tr: Transition, path: list) -> None:
        releases = tr.actions.count(RELEASE)
        if releases and phase in PINNED:
            self.add("pinned", path, "releases pages while a step still pins them")
        elif releases and phase in LIVE:
            self.add("pinned", path, "releases the pages of a request still being served "
                                     "(neither cancelled nor finished)")
        if releases > 1 or (releases and cfg.released):
            self.add("once", path, "releases the pages a second time")
        if event == "cancel":
            self._cancel_rules(path)
        elif cfg.cancelled:
            if NOTIFY in tr.actions:
                self.add("stop", path, "notifies the client again")
            if tr.next_state in SERVED:
                self.add("stop", path, f"puts a cancelled request back in {tr.next_state!r}")
        crossed = phase in PAST_FENCE and cfg.phase not in PAST_FENCE
        if crossed and not (releases or cfg.released):
            self.add("reclaim", path, self._after_fence(tr.next_state, phase))


def table_faults(ctx: CheckContext) -> tuple[TableFaults | None, str]:
    if "table_faults" not in ctx.memo:
        table, problem = table_answers(ctx)
        ctx.memo["table_faults"] = (None if problem else TableFaults(table), problem)
    return ctx.memo["table_faults"]


def _table_measure(ctx: CheckContext, rule: str, what: str) -> Measure:
    faults, problem = table_faults(ctx)
    if problem:
        return Measure(0.0, problem)
    found = list(faults.found[rule])
    if not found:
        return Measure(1.0, f"all 50 entries and every event path keep it: {what}")
    more = f" ({len(found)} ways in all)" if len(found) > 1 else ""
    return Measure(0.0, found[0] + more, tuple(found[:20]))


@check("lesson4.table_pinned")
def table_pinned(ctx: CheckContext, params: dict) -> Measure:
    return _table_measure(ctx, "pinned", "pages are released only once no step pins them")


@check("lesson4.table_stop")
def table_stop(ctx: CheckContext, params: dict) -> Measure:
    return _table_measure(ctx, "stop", "a cancel stops scheduling and notifies the client once, at once")


@check("lesson4.table_reclaim")
def table_reclaim(ctx: CheckContext, params: dict) -> Measure:
    return _table_measure(ctx, "reclaim", "every cancelled or finished request is released at its fence")


@check("lesson4.table_once")
def table_once(ctx: CheckContext, params: dict) -> Measure:
    return _table_measure(ctx, "once", "no event sequence releases a request's pages twice")


@check("lesson4.table_terminal")
def table_terminal(ctx: CheckContext, params: dict) -> Measure:
    return _table_measure(ctx, "terminal", "done stays done")


# ---- prefix_key probes --------------------------------------------------------------------
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
        ctx.sandbox.restart()       # a second process: new module state, new str hash seed
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
    stub = _not_implemented([x for a in answers for x in a.value])
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
            return (f"gave {first.value[:40]!r}, then {again.value[:40]!r} for the same input: a key "
                    "must depend on its inputs alone (no random salt, counter, clock or id())")
        if other.problem:
            return f"in a second process: {other.problem}"
        if other.value != first.value:
            return (f"gave {first.value[:40]!r} in one process and {other.value[:40]!r} in another: "
                    "str hash() is salted per process; use hashlib or the text itself")
        return ""

    answers = [Answer(case, got) for case, got in keys.values()]
    stub = _not_implemented([x for a in answers for x in a.value])
    if stub:
        return Measure(0.0, stub)
    return grade_answers(answers, judge, "inputs asked three times")


# ---- publishable probes -----------------------------------------------------------------
@check("lesson4.publishable")
def publishable(ctx: CheckContext, params: dict) -> Measure:
    def judge(case: Case, got: tuple) -> str:
        offered = {p.index: p for p in case.inputs}
        strange = [i for i in got if i not in offered]
        if strange:
            return f"returned index {strange[0]}, not the index of an offered page ({sorted(offered)})"
        want = {i for i, p in offered.items() if may_publish(p)}
        extra, missing = sorted(set(got) - want), sorted(want - set(got))
        if extra:
            p = offered[extra[0]]
            why = ("is already published" if p.published else
                   f"holds {p.prompt_tokens} of {p.page_tokens} prompt tokens" if p.prompt_tokens < p.page_tokens
                   else f"has {p.written_tokens} of {p.page_tokens} slots written")
            return f"publishes page {extra[0]}, which {why}; expected {sorted(want)}"
        if missing:
            return f"leaves out page {missing[0]} (full, written, not published); expected {sorted(want)}"
        return ""

    answers = ask(ctx, "publishable", ctx.family("publish"), lambda c: (c.inputs,), tuple[int, ...])
    return grade_answers(answers, judge, "offers")


# ---- worker runs ----------------------------------------------------------------------------
@dataclass(frozen=True)
class LearnerRun:
    run: Run
    log: CallLog

    def failed(self, function: str) -> str:
        """Why calls of ``function`` failed (raised, timed out, wrong type), or "".

        A property cannot be credited on a run where the worker had to fall back for the
        function. A typed but unusable answer (an index not offered) is judged by what the
        worker made of it instead, like any other decision."""
        n = self.log.failures.get(function, 0)
        if not n:
            return ""
        first = self.log.first[function]
        if "not implemented" in first:
            return first
        return f"{n} {function} calls gave no usable answer; first: {first}"


def learner_run(ctx: CheckContext, case: Case) -> LearnerRun:
    """The scenario with the learner's three functions (in the sandbox); once per grading run."""
    key = ("run", case.name)
    if key not in ctx.memo:
        s, log = case.inputs, CallLog()
        policy = learner_policy(ctx.sandbox, reference_policy(s.sheet), FUNCTIONS, log)
        ctx.memo[key] = LearnerRun(s.run(policy), log)
    return ctx.memo[key]


def oracle_hits(case: Case) -> int:
    """The reference's prefix hits on the scenario: the same for every submission."""
    return remember("lesson4-oracle-hits", case.digest, lambda: prefix_hits(case.inputs.run()),
                    persist=case.visibility == "public")


def prefix_hits(run: Run) -> int:
    hits = run.series["prefix_hits"]
    return int(hits[-1]) if len(hits) else 0


def _where(case: Case) -> str:
    return f"public scenario {case.name}" if case.visibility == "public" else case.where


Finding = tuple  # (what, one line): what names the kind in the tally ("leaks")

LABELS = {"use_after_free": "use-after-free", "leak": "leaks", "double_release": "double releases",
          "release_of_referenced": "releases of pages others reference",
          "scheduled_after_cancel": "requests scheduled after their cancel",
          "cross_scope_hit": "cross-scope hits", "wrong_prefix_hit": "wrong-position hits",
          "poisoned_publish": "poisoned publishes"}


def early_releases(run: Run) -> list[Finding]:
    """Requests whose pages were released before their fence, or while still served."""
    out = []
    for r in run.requests:
        if r.cancel_s is not None and r.released_s is not None and r.released_s < r.fence_s:
            out.append(("releases before the fence",
                        f"{r.id} was cancelled at {r.cancel_s:.3f} s during a step that ends "
                        f"{r.fence_s:.3f} s; its pages were released at {r.released_s:.3f} s, "
                        "before that step completed"))
        elif r.outcome == "failed" and "released while it was running" in r.reason:
            out.append(("releases while served",
                        f"{r.id}'s pages were released at {r.released_s:.3f} s while it was still "
                        "being served (neither cancelled nor finished)"))
    return out


def late_releases(run: Run) -> list[Finding]:
    return [("lazy releases", f"{r.id} was cancelled at {r.cancel_s:.3f} s; its fence was "
             f"{r.fence_s:.3f} s, but its pages came back at {r.released_s:.3f} s (lazy reclamation)")
            for r in run.requests
            if r.cancel_s is not None and r.released_s is not None and r.released_s > r.fence_s]


def _faults(run: Run, kinds: tuple) -> list[Finding]:
    return [(LABELS[v.kind], v.detail) for v in run.violations if v.kind in kinds]


def _tally(found: list[Finding]) -> str:
    counts: dict[str, int] = {}
    for what, _ in found:
        counts[what] = counts.get(what, 0) + 1
    return ", ".join(f"{n} {what}" for what, n in counts.items())


def _run_measure(ctx: CheckContext, needs: tuple, find, noun: str) -> Measure:
    """Share of scenarios where ``find(run)`` reports nothing; the first report as feedback."""
    cases = ctx.family("scenario")
    if not cases:
        return Measure(0.0, "no scenarios to run")
    clean, bad = 0, []
    for case in cases:
        out = learner_run(ctx, case)
        failed = next((out.failed(f) for f in needs if out.failed(f)), "")
        if failed:
            return Measure(0.0, failed, (case.cite,))
        found = find(out.run)
        if found:
            bad.append((case, found))
        else:
            clean += 1
    if not bad:
        return Measure(1.0, f"none in {len(cases)} scenario runs: {noun}")
    case, found = bad[0]
    return Measure(clean / len(cases), f"{_where(case)}: {found[0][1]} ({_tally(found)} in this run)",
                   tuple(c.cite for c, _ in bad))


@check("lesson4.run_no_use_after_free")
def run_no_use_after_free(ctx: CheckContext, params: dict) -> Measure:
    return _run_measure(ctx, ("on_event",), lambda run: _faults(run, ("use_after_free",))
                        + early_releases(run), "no page released under a step that still pins it")


@check("lesson4.run_reclaim_at_fence")
def run_reclaim_at_fence(ctx: CheckContext, params: dict) -> Measure:
    return _run_measure(ctx, ("on_event",), lambda run: _faults(run, ("leak",)) + late_releases(run),
                        "no leak, every cancelled request released at its fence")


@check("lesson4.run_release_once")
def run_release_once(ctx: CheckContext, params: dict) -> Measure:
    return _run_measure(ctx, ("on_event",),
                        lambda run: _faults(run, ("double_release", "release_of_referenced")),
                        "no double release")


@check("lesson4.run_stop_after_cancel")
def run_stop_after_cancel(ctx: CheckContext, params: dict) -> Measure:
    return _run_measure(ctx, ("on_event",), lambda run: _faults(run, ("scheduled_after_cancel",)),
                        "no request scheduled after its cancel")


@check("lesson4.run_hits_in_scope")
def run_hits_in_scope(ctx: CheckContext, params: dict) -> Measure:
    return _run_measure(ctx, ("prefix_key",),
                        lambda run: _faults(run, ("cross_scope_hit", "wrong_prefix_hit")),
                        "no cross-scope or wrong-position hit")


@check("lesson4.run_clean_publish")
def run_clean_publish(ctx: CheckContext, params: dict) -> Measure:
    return _run_measure(ctx, ("publishable",), lambda run: _faults(run, ("poisoned_publish",)),
                        "no page published before its write completed")


@check("lesson4.run_hit_rate")
def run_hit_rate(ctx: CheckContext, params: dict) -> Measure:
    cases = ctx.family("scenario")
    if not cases:
        return Measure(0.0, "no scenarios to run")
    worst = None
    for case in cases:
        out = learner_run(ctx, case)
        failed = next((out.failed(f) for f in ("prefix_key", "publishable") if out.failed(f)), "")
        if failed:
            return Measure(0.0, failed, (case.cite,))
        got, want = prefix_hits(out.run), oracle_hits(case)
        share = min(1.0, got / want) if want else 1.0
        if worst is None or share < worst[0]:
            worst = (share, case, got, want)
    share, case, got, want = worst
    words = (f"{_where(case)}: {got} prefix hits, the oracle's keys found {want} "
             f"({share:.0%}; at least {HIT_SHARE:.0%} is the target)")
    if share < HIT_SHARE:
        words += ("; requests of one scope with the same prompt prefix must get the same keys, "
                  "and every full written page must be published")
        unusable = next((v.detail for v in learner_run(ctx, case).run.violations
                         if v.kind == "invalid_decision" and not v.detail.startswith("on_event")), "")
        if unusable:
            words += f" (the worker could not use some answers: {unusable[:160]})"
    return Measure(share, words, (case.cite,))

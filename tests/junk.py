"""Junk submissions: constant and trivial answers for every code lesson.

A grade must not pay for an answer that ignores its inputs. For each graded function this
module lists two tiers of such answers:

- constants: every constant of its return type that the validator accepts, built from
  representative values of each field (each member of an enumeration, 0, 1, -1, a huge
  number, empty and one-element tuples, an empty, a short and a too-long string);
- trivial answers: an argument passed straight back ("return the first argument"), one
  field of it, or fields glued together without a rule.

A junk submission gives every function of its lesson one answer of a tier; the lesson's
list cycles through each function's answers, so every answer of every function is graded
at least once. tests/test_junk.py bounds what each tier earns (BOUNDS).
"""
from __future__ import annotations

from pathlib import Path

from reference.shapes import (ACTIONS, CHUNK_VERDICTS, CONTRACT_REASONS, DECISIONS, QUALIFICATIONS,
                              RELEASE_DECISIONS, STATES)

# The share of a lesson's points a tier may earn at most, in any mode: a constant ignores
# every input, so it deserves nothing anywhere; a trivial answer may keep a property it has
# honestly (a key that is a field of its input is deterministic), never more than this.
BOUNDS = {"constant": 0.0, "trivial": 0.10}

INTS = ("0", "1", "-1", str(2 ** 61))
FLOATS = ("0.0", "1.0", "-1.0", "1e18")
ACTION_SETS = ((),) + tuple((a,) for a in ACTIONS) + (ACTIONS,)


def _args(params: str) -> tuple[str, ...]:
    """'return the argument': each parameter passed straight back."""
    return tuple(p.strip() for p in params.split(","))


# lesson -> function -> (its parameters, constant answers, trivial answers): the expressions
# a junk version returns.
FUNCTIONS: dict[str, dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]]] = {
    "lesson1": {
        "kv_bytes_per_token": ("model", INTS, _args("model") + ("model.layers", "model.head_dim")),
        "pages_for": ("tokens, page_tokens", INTS, _args("tokens, page_tokens")),
        "pool_pages": ("model, worker", INTS, _args("model, worker") + ("worker.max_running",)),
        "worst_case_pages": ("request, worker", INTS, _args("request, worker")
                             + ("request.prompt_tokens", "request.max_new_tokens")),
        "check_contract": ("request, model, worker",
                           ("Verdict(True, '')", "Verdict(False, '')")
                           + tuple(f"Verdict(False, {r!r})" for r in CONTRACT_REASONS),
                           _args("request, model, worker")),
    },
    "lesson2": {
        "admit": ("request, ledger", tuple(f"Admission({d!r}, {k})" for d in DECISIONS for k in INTS),
                  _args("request, ledger") + ("Admission('admit', ledger.unallocated_pages)",
                                              "Admission('admit', request.prompt_tokens + request.max_new_tokens)")),
    },
    "lesson3": {
        # A fixed-size chunk (one page, min_chunk_tokens) is no junk: it is a rule, graded by
        # what it breaks (tests/submissions/lesson3/fixed_tiny.py keeps page alignment).
        "choose_chunk": ("ctx", tuple(f"ChunkPlan({k}, {v!r})" for v in CHUNK_VERDICTS for k in INTS),
                         _args("ctx") + ("ChunkPlan(ctx.prefill_remaining, 'starved')",)),
    },
    "lesson4": {
        "on_event": ("state, event, step_in_flight",
                     tuple(f"Transition({s!r}, {a!r})" for s in STATES for a in ACTION_SETS),
                     _args("state, event, step_in_flight")
                     + ("Transition(state)", f"Transition(state, {ACTIONS!r})")),
        "prefix_key": ("scope, parent_key, block_tokens", ("''", "'k'", "'x' * 600"),
                       _args("scope, parent_key, block_tokens") + ("str(block_tokens)", "scope + parent_key")),
        "publishable": ("pages", ("()", "(0,)", "(-1,)"),
                        ("pages", "tuple(range(len(pages)))", "tuple(p.index for p in pages)")),
    },
    "lesson5": {
        "qualify": ("record, slo", tuple(repr(q) for q in QUALIFICATIONS + ("",)),
                    ("record", "slo", "record.outcome")),
        "goodput": ("records, slo, window_s", FLOATS,
                    _args("records, slo, window_s") + ("len(records) / window_s",)),
        "decide_release": ("baseline_runs, candidate_runs, rule",
                           tuple(f"ReleaseDecision({d!r})" for d in RELEASE_DECISIONS + ("",)),
                           _args("baseline_runs, candidate_runs, rule")),
    },
}
LESSONS = tuple(FUNCTIONS)
TIERS = tuple(BOUNDS)


def submissions(lesson: str, tier: str) -> list[tuple[str, str]]:
    """(name, source) of the lesson's junk submissions of a tier: the i-th gives each
    function its i-th answer (cycling), until every answer of every function has been given.
    A trivial submission gives a function without trivial answers a constant one."""
    functions = FUNCTIONS[lesson]
    pick = {f: (trivial if tier == "trivial" and trivial else constants)
            for f, (_, constants, trivial) in functions.items()}
    count = max(len(answers) for answers in pick.values())
    out = []
    for i in range(count):
        lines = ["from reference.shapes import *", ""]
        for function, (params, _, _) in functions.items():
            lines += [f"def {function}({params}):", f"    return {pick[function][i % len(pick[function])]}", ""]
        out.append((f"{lesson}-{tier}{i:02d}", "\n".join(lines)))
    return out


def write(lesson: str, tier: str, folder: Path) -> list[Path]:
    """The lesson's junk submissions of a tier, as files in ``folder``."""
    paths = []
    for name, source in submissions(lesson, tier):
        path = folder / f"{name}.py"
        path.write_text(source)
        paths.append(path)
    return paths

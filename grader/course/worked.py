"""A design sheet's worked numbers and written answers: blanks, and checks by what each is.

The learner writes into the sheet what they worked out with their own functions (lesson
1's sizes, lesson 3's decode-only step and chunks) and a few answers in their own words
(lesson 4's key encoding and fence, lesson 5's ship rule, lesson 6's change record). The
templates leave them blank. A blank (nothing after the key) is an answer not yet given:
it is allowed, so a sheet can be replayed before every lesson is done, and
``grader sheet validate`` lists it as not yet filled.

A number that is given is checked against the section's own model, worker and cost
model, by the property that defines it. Lesson 1's sizes are the worker's own arithmetic
(``reference.sizing.Geometry``: the worker cannot run without it). A chunk is checked as
a chunk: a candidate (page-aligned, or the whole remaining prompt), whose step keeps the
budget, and whose next candidate's step does not; it is never computed here. This module
ships in the learner edition, so it holds no lesson's answer.
"""
from __future__ import annotations

import itertools
import math
import re
from fractions import Fraction
from typing import Any, Iterator, Mapping

from reference.shapes import CostModel
from reference.sizing import Geometry
from reference.units import parse_bytes

# Every worked number and written answer of the sheet, with the question it answers.
ANSWERS = {
    "request_contract.kv_bytes_per_token": "bytes of KV one token of context takes on the section's model",
    "request_contract.page_bytes": "bytes of one page of KV",
    "request_contract.pool_pages": "pages in the pool of the section's worker",
    "chunk_rule.worked.decode_only_s": "the step of the worked batch alone, with no chunk, in seconds",
    "chunk_rule.worked.first_chunk_tokens": "the largest chunk that fits before any of the prompt is prefilled",
    "chunk_rule.worked.late_chunk_tokens": "the largest chunk that fits after late_done tokens are prefilled",
    "cancellation.key_encoding": "in words: how your prefix_key keeps scope, parent and tokens apart, "
                                 "and why it is the same in every process",
    "cancellation.fence": "in words: when the client is told, and when a cancelled request's pages come back",
    "release_criteria.ship_when": "in words: when a release ships",
    "change_record": "the releases of your sheet, their changes and their rollback rule",
}
SIZES = ("kv_bytes_per_token", "page_bytes", "pool_pages")
COST = CostModel()           # the sheet's worker has the course's default cost model
PAGE_TOKENS = 16             # the course's page, for a sheet without a request contract
DECODE_ONLY_REL = 1e-4       # a decode-only step within 0.01% agrees


def blank(value: Any) -> bool:
    return value is None or (isinstance(value, (str, list)) and not value)


def _get(sheet: Mapping, path: str) -> tuple[bool, Any]:
    node: Any = sheet
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return False, None
        node = node[part]
    return True, node


def unfilled(sheet: Mapping, sections) -> Iterator[tuple[str, str]]:
    """(path, message) of every blank answer of the given sections."""
    for path, question in ANSWERS.items():
        if path.split(".")[0] in sections:
            present, value = _get(sheet, path)
            if present and blank(value):
                yield path, f"not yet filled ({question})"


# ---- lesson 1: the sizes are the worker's own arithmetic ---------------------------------------
# A wrong size is named with what is wrong, never with the size itself: the sheet asks the
# learner to work it out with their own functions (docs/learners.md: "never the answer").
WHAT = {"kv_bytes_per_token": "bytes of KV per token", "page_bytes": "bytes of one page",
        "pool_pages": "pages of the pool"}
_BYTE_SIZES = (("model", "weight_bytes"), ("worker", "device_bytes"), ("worker", "reserved_bytes"))
_BINARY = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([KMGT])iB\s*", re.IGNORECASE)


def _decimal_reading(raw: Any) -> int | None:
    """The bytes a binary-unit size comes to when its unit is misread as decimal (80GiB as
    80 x 10^9), or None when it has no binary unit to misread."""
    match = _BINARY.fullmatch(raw) if isinstance(raw, str) else None
    if not match:
        return None
    exact = Fraction(match.group(1)) * 1000 ** ("KMGT".index(match.group(2).upper()) + 1)
    return int(exact) if exact.denominator == 1 else None


def _misread_pools(rc: Mapping, geometry: Geometry) -> set[int]:
    """The pools the section gives when one or more of its byte sizes is read in decimal units."""
    sizes = [(parse_bytes(rc[part][key], key), _decimal_reading(rc[part][key])) for part, key in _BYTE_SIZES]
    pools = set()
    for reading in itertools.product((0, 1), repeat=len(sizes)):
        if any(reading) and all(sizes[i][1] is not None for i, r in enumerate(reading) if r):
            weights, device, reserved = (sizes[i][r] for i, r in enumerate(reading))
            pools.add(max(0, device - weights - reserved) // geometry.page_bytes)
    return pools - {geometry.pool_pages}


def _size_hint(key: str, value: int, rc: Mapping, geometry: Geometry) -> str:
    if key == "page_bytes":
        for unit, size in (("KiB", 1 << 10), ("MiB", 1 << 20)):
            if value * size == geometry.page_bytes:
                return f"; that is the page in {unit}, and the sheet counts bytes"
        if value == geometry.kv_bytes_per_token:
            return f"; that is one token's KV, and a page holds {geometry.page_tokens} tokens"
    if key == "pool_pages" and value in _misread_pools(rc, geometry):
        return ("; that is the pool with a byte size read in decimal units (GB for GiB), "
                "and the course counts in binary units")
    return ""


def contract_problems(rc: Mapping, geometry: Geometry) -> Iterator[tuple[str, str]]:
    for key in SIZES:
        value, want = rc.get(key), getattr(geometry, key)
        if not blank(value) and value != want:
            side = "more" if value > want else "fewer"
            yield (f"request_contract.{key}",
                   f"{value} does not agree with the model and worker in the section: it is {side} "
                   f"{WHAT[key]} than they give{_size_hint(key, value, rc, geometry)}")


# ---- lesson 3: a chunk is checked by what makes it the answer ------------------------------------
def chunk_problems(chunk: Mapping, page_tokens: int) -> Iterator[tuple[str, str]]:
    w = chunk.get("worked")
    if not isinstance(w, Mapping):
        return
    at = "chunk_rule.worked"
    if w["late_done"] >= w["prompt_tokens"]:
        yield f"{at}.late_done", (f"{w['late_done']} leaves nothing of the {w['prompt_tokens']}-token "
                                  "prompt to prefill; it must be smaller")
        return
    budget, n, context_sum = chunk["gap_budget_s"], w["decode_requests"], w["decode_requests"] * w["decode_context"]
    alone = COST.step_time_of(n, context_sum)
    if not blank(w["decode_only_s"]) and not math.isclose(w["decode_only_s"], alone, rel_tol=DECODE_ONLY_REL):
        ms = math.isclose(w["decode_only_s"] / 1000, alone, rel_tol=DECODE_ONLY_REL)
        yield f"{at}.decode_only_s", (f"{w['decode_only_s']} s is not the step of {n} requests decoding at "
                                      f"context {w['decode_context']} under the default cost model"
                                      + (": that is the step in milliseconds, and the sheet takes seconds"
                                         if ms else f" (to within {DECODE_ONLY_REL:.2%}: five significant "
                                                    "figures, in seconds)"))
    for key, done in (("first_chunk_tokens", 0), ("late_chunk_tokens", w["late_done"])):
        if not blank(w[key]):
            why = _not_the_largest(w[key], done, w["prompt_tokens"] - done, page_tokens,
                                   lambda c: COST.step_time_of(n, context_sum, c, done), budget)
            if why:
                yield f"{at}.{key}", why


def _not_the_largest(c: int, done: int, remaining: int, page: int, step, budget: float) -> str:
    """Why c is not the largest candidate chunk that fits ("" when it is)."""
    where = f"after {done} prefilled tokens" if done else "at the start of the prompt"
    if c > remaining:
        return f"{c} is more than the {remaining} tokens left to prefill {where}"
    if c % page and c != remaining:
        return (f"{c} is neither a whole number of {page}-token pages nor the {remaining} tokens "
                "that finish the prompt")
    if c and step(c) > budget:
        return f"a chunk of {c} tokens {where} makes the step {step(c):.9g} s, over the {budget} s budget"
    if c == remaining:
        return ""
    nxt = min(c + page, remaining)              # the next candidate (c is page-aligned here)
    if step(nxt) <= budget:
        return f"{c} is not the largest chunk that fits {where}: a larger one fits too"
    return ""

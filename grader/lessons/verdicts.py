"""Lesson 5's verdicts: the oracle's qualify on one record, and the four qualify criteria.

A record's verdict hinges on one idea (the deadlines, the largest gap against the average,
a cancel, an outcome that counts against the service), and a mistake about that idea
should cost the criterion that names it: ``topic`` says which, and the lesson's records
are filed by it. Feedback shows what decides the verdict and explains the oracle's in the
lesson's words.
"""
from __future__ import annotations

from typing import Optional

from grader.engine.cases import Case
from grader.engine.checks import CheckContext, Measure, ask_once, check, grade_answers
from grader.engine.oracle import reference_oracle, reference_solution
from reference.shapes import QUALIFICATIONS, RequestRecord, Slo

oracle = reference_oracle("lesson5")     # recorded for the public cases in the learner edition

TOPICS = ("deadlines", "gaps", "cancels", "outcomes")
EDGE_S = 1e-6            # real records keep every deciding time this far from its deadline


def topic(record: RequestRecord, slo: Optional[Slo]) -> str:
    """The idea a record's verdict hinges on (asked while cases are built, in the course)."""
    reference = reference_solution("lesson5")
    if reference.qualify(record, slo) != reference.qualify(record, slo, gaps="average"):
        return "gaps"
    if record.outcome in ("rejected", "failed", "preempted"):
        return "outcomes"
    return "cancels" if record.outcome == "cancelled_by_client" else "deadlines"


def _gaps(times) -> list[float]:
    return [b - a for a, b in zip(times, times[1:])]


def _from_deadlines(record: RequestRecord, slo: Slo) -> list[float]:
    """How far each deciding time of a record is from its deadline (0: exactly on it)."""
    times = record.token_times
    due = record.arrival_s + slo.ttft_s
    near = []
    if times:
        near.append(times[0] - due)
        near += [g - slo.gap_s for g in _gaps(times)]
    if record.outcome == "cancelled_by_client" and record.cancel_s is not None:
        near.append(record.cancel_s - due)
        if times:
            near.append(record.cancel_s - times[-1] - slo.gap_s)
    return near


def clear_of_edges(record: RequestRecord) -> bool:
    """No deciding time of a real record within EDGE_S of its deadline."""
    return all(abs(x) > EDGE_S for x in _from_deadlines(record, record.slo))


def on_a_deadline(record: RequestRecord, slo: Optional[Slo]) -> bool:
    """Some deciding time exactly on its deadline (the edge records' times are exact in binary
    floating point): the README's edge, "a token, or a cancel, exactly at its deadline is in
    time". Such records are a few among many of their verdict, so within a verdict they weigh
    as a clause of their own: `>=` for `>` at D1, at gap_s or at a cancel kept 16.7 to 16.8 of
    17 when they counted one record each."""
    return any(x == 0 for x in _from_deadlines(record, slo or record.slo))


def seconds(x: float) -> str:
    """A time as feedback says it."""
    return f"{x:.6g} s"


def show_record(record: RequestRecord, slo: Optional[Slo]) -> str:
    """The record as feedback shows it: what decides its verdict."""
    own = record.slo
    use = slo or own
    times = record.token_times
    parts = [f"{record.outcome}", f"arrival {seconds(record.arrival_s)}",
             f"slo ttft {seconds(use.ttft_s)} gap {seconds(use.gap_s)}"
             + (f" (passed explicitly; the record's own is ttft {seconds(own.ttft_s)} gap "
                f"{seconds(own.gap_s)})" if slo else ""),
             f"first-token deadline {seconds(record.arrival_s + use.ttft_s)}"]
    if times:
        gaps = _gaps(times)
        parts.append(f"{len(times)} token{'s' if len(times) != 1 else ''}, first at {seconds(times[0])}")
        if gaps:
            parts.append(f"largest gap {seconds(max(gaps))}, mean gap {seconds(sum(gaps) / len(gaps))}, "
                         f"last token {seconds(times[-1])}")
    else:
        parts.append("no tokens")
    if record.cancel_s is not None:
        parts.append(f"cancelled at {seconds(record.cancel_s)}")
    return f"record {record.id} ({'; '.join(parts)})"


def explain(record: RequestRecord, slo: Optional[Slo], verdict: str) -> str:
    """Why the oracle's verdict is what it is, in the lesson's words."""
    use = slo or record.slo
    times, due = record.token_times, record.arrival_s + use.ttft_s
    cancel = record.cancel_s
    if verdict == "rejected":
        return "a rejection counts against the service"
    if verdict == "failed":
        return f"a request that ends {record.outcome} counts against the service"
    if verdict == "late_first_token":
        if not times and record.outcome == "completed":
            return "it completed without ever emitting a first token"
        if not times:
            return (f"the client cancelled at {seconds(cancel)}, after the first-token deadline "
                    f"{seconds(due)} had passed")
        return f"the first token came at {seconds(times[0])}, after the deadline {seconds(due)}"
    if verdict == "slow_tokens":
        gaps = _gaps(times)
        if gaps and max(gaps) > use.gap_s:
            return (f"its largest gap {seconds(max(gaps))} exceeds gap_s {seconds(use.gap_s)} (the mean gap "
                    f"{seconds(sum(gaps) / len(gaps))} does not matter: the deadline is per token)")
        return (f"the client cancelled {seconds(cancel - times[-1])} after the last token, when the next "
                f"token was already more than gap_s {seconds(use.gap_s)} late")
    if verdict == "excluded":
        return "the client cancelled before any deadline was missed (a cancel exactly at a deadline comes before the miss)"
    edge = ["the first token came exactly at the deadline, which is in time"] if times and times[0] == due else []
    if times and _gaps(times) and max(_gaps(times)) == use.gap_s:
        edge.append("its largest gap equals gap_s, which is in time")
    return "; ".join(edge) or "every deadline was met"


def _judge_verdict(case: Case, got: str) -> str:
    record, slo = case.inputs
    want = oracle.qualify(record, slo)
    if got not in QUALIFICATIONS:
        return f"returned {got!r}, which is not one of {', '.join(QUALIFICATIONS)}"
    return "" if got == want else f"returned {got!r}, expected {want!r}: {explain(record, slo, want)}"


def _qualify_check(name: str):
    def measure(ctx: CheckContext, params: dict) -> Measure:
        # Every topic's records go in one batch the first time any topic is graded.
        every = [c for c in ctx.cases if c.family.startswith("qualify-")]
        ask_once(ctx, "qualify", "qualify", every, lambda c: c.inputs, str)
        mine = ask_once(ctx, "qualify", "qualify", ctx.family(f"qualify-{name}"), lambda c: c.inputs, str)
        # Each verdict the oracle gives weighs the same: one verdict for every record is
        # right on one kind of record only; within a verdict, the records exactly on a
        # deadline weigh as much as the rest.
        return grade_answers(mine, _judge_verdict, "records", by=lambda c: oracle.qualify(*c.inputs),
                             within=lambda c: on_a_deadline(*c.inputs))
    return measure


for _topic in TOPICS:
    check(f"lesson5.qualify_{_topic}")(_qualify_check(_topic))

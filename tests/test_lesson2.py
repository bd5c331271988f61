"""Lesson 2 graded end to end: each wrong ledger loses exactly the criteria its mistake breaks.

Wrong ledgers are graded twice: on the public cases (what a learner's `grader check`
sees) and on the hidden cases alone (what `grader grade` adds), so each mistake is shown
to be caught by both, and every other criterion to be kept by both.
"""
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import (ROOT, SECRET as SECRET_OF_TESTS, SUBMISSIONS, full, grade, other_than, scores,
                      write_mutant)
from grader.engine.errors import InputError
from grader.engine.layout import find_course
from grader.lessons import ledger_runs as runs
from grader.lessons import lesson2 as L
from grader.lessons.ledger import available, footprint, need
from grader.engine.pipeline import grade_submission
from grader.course.scenario import load_scenario
from grader.engine.submission import load_submission
from mutants import mutations, wrong_file
from grader.engine.oracle import reference_policy
from reference.solutions import lesson2 as reference_ledger
from reference.workload import load_workload

L2 = SUBMISSIONS / "lesson2"
REFERENCE = ROOT / "reference" / "solutions" / "lesson2.py"
PUBLIC = ROOT / "assignments" / "lesson2" / "public"
README = ROOT / "assignments" / "lesson2" / "README.md"
CRITERIA = {"safety", "efficiency", "liveness", "reservations"}


def PROBES() -> list[dict]:
    return yaml.safe_load((ROOT / "assignments/lesson2/probes.yaml").read_text())["probes"]


def lost(report) -> set[str]:
    got, top = scores(report), full(report)
    return {k for k in got if got[k] < top[k]}


def feedback(report, criterion: str) -> str:
    return next(c.feedback for c in report.criteria if c.id == criterion)


def grade_hidden(path: Path, secret: bytes):
    """The hidden cases alone, as `grader grade` adds them to the public ones."""
    course = find_course(str(ROOT))
    return grade_submission("lesson2", load_submission(path), course, mode="grade",
                            cases=L.hidden_cases(secret, course))


# ---- the reference, the stub, another correct ledger ---------------------------------
# Every expectation of the hidden cases holds under each of conftest's secrets (`secret`).
@pytest.fixture(scope="module")
def reference_grade(secret):
    return grade("lesson2", REFERENCE, "grade", secret)


def test_reference_full_marks_public_and_hidden(reference_grade):
    assert reference_grade.score == reference_grade.max_score == 10
    families = {(c["family"], c["visibility"]) for c in reference_grade.cases}
    assert {("scenario", "hidden"), ("probe", "hidden"), ("scenario", "public"),
            ("probe", "public")} <= families
    public = grade("lesson2", REFERENCE, "check")
    assert public.score == public.max_score
    assert all(c["visibility"] == "public" for c in public.cases)


def test_different_correct_ledger_keeps_full_marks():
    report = grade("lesson2", L2 / "alt_correct.py", "check")
    assert report.score == report.max_score, [c.feedback for c in report.criteria if not c.passed]


def test_different_correct_ledger_keeps_full_marks_on_hidden_cases(secret):
    report = grade_hidden(L2 / "alt_correct.py", secret)
    assert report.score == report.max_score, [c.feedback for c in report.criteria if not c.passed]


# ---- the five wrong ledgers ----------------------------------------------------
# name -> (criteria it must lose, criteria it may also lose because it breaks them too)
WRONG = {
    "prompt_only": ({"safety", "reservations"},
                    # its "can never fit" test sees the prompt only, so it admits requests
                    # whose output can never fit: a liveness failure of its own making; and
                    # promising less, it may find room for every request of a hidden run, which
                    # then shows no efficiency (secret 716507b59e835441: prefix-multiscope, one
                    # admission beyond capacity, none held back)
                    {"liveness", "efficiency"}),
    "shared_as_new": ({"efficiency", "reservations"}, set()),
    # Counting inactive hits as free capacity too, it can find room for the new pages of a
    # request that can never fit, and admit it instead of rejecting it: a liveness failure
    # of its own making, on the probes where the miscounted capacity covers them (drawn by
    # some secrets and not others).
    "inactive_free": ({"safety"}, {"liveness", "efficiency"}),
    # Blind to what running requests were promised, it may find room for every request of a
    # hidden run: a run where it told none to wait shows no efficiency (secret
    # 782809428e3b259d, 44 admissions beyond capacity on prefix-multiscope, none held back).
    # So may every ledger that admits beyond capacity: efficiency lost beside safety must be
    # that guard's (OVER_ADMITTED).
    "ignores_outstanding": ({"safety"}, {"efficiency"}),
    "waits_forever": ({"liveness"}, set()),
}
# What the feedback of the criterion that names the mistake must say.
SAYS = {
    "prompt_only": ("safety", r"r\d+ reserved \d+ pages, needed \d+ \(prompt \d+ \+ max_new \d+ "
                              r"at 16 tokens/page = \d+ pages"),
    "shared_as_new": ("efficiency", r"met their SLO under your ledger, \d+ under the oracle ledger"
                                    r".*it needed \d+ .*\d+ prefix hits, \d+ active"),
    "inactive_free": ("safety", r"admitting r\d+ took \d+ pages of capacity \(\d+ reserved \+ "
                                r"[1-9]\d* inactive cached hits reactivated\)"),
    "ignores_outstanding": ("safety", r"promised to running requests = \d+ available"),
    "waits_forever": ("liveness", r"r\d+ can never fit .* waited at the head of the queue"),
}


# What efficiency's feedback says when a ledger that admits beyond capacity lost it as well.
OVER_ADMITTED = "never held a request back"


def _loses_where_it_is_wrong(name, report, where):
    must, may = WRONG[name]
    assert must <= lost(report), f"{name} kept points on {must - lost(report)} ({where})"
    assert lost(report) <= must | may, f"{name} lost {lost(report) - must - may} ({where})"
    if "efficiency" in lost(report) - must:
        assert "safety" in must and OVER_ADMITTED in feedback(report, "efficiency"), \
            feedback(report, "efficiency")
    criterion, pattern = SAYS[name]
    assert re.search(pattern, feedback(report, criterion)), feedback(report, criterion)


@pytest.mark.parametrize("name", sorted(WRONG))
def test_wrong_ledger_loses_where_it_is_wrong(name, tmp_path):
    _loses_where_it_is_wrong(name, grade("lesson2", wrong_file("lesson2", name, tmp_path), "check"),
                             "public")


@pytest.mark.parametrize("name", sorted(WRONG))
def test_wrong_ledger_loses_where_it_is_wrong_on_hidden_cases(name, tmp_path, secret):
    _loses_where_it_is_wrong(name, grade_hidden(wrong_file("lesson2", name, tmp_path), secret),
                             "hidden")


# Under this secret inactive_free, which counts inactive hits as free capacity, admits beyond
# capacity on prefix-multiscope and tells no request to wait that fit there; its
# over-admissions cost it requests within their SLO (188 against the oracle ledger's 195
# when found). That loss is safety's: efficiency is the admitting of what fits.
OVER_ADMITS_WITH_A_SHORTFALL = bytes.fromhex("7cac6fb27a8c4010")


def test_a_shortfall_of_over_admission_is_charged_to_safety_not_efficiency(tmp_path):
    report = grade_hidden(wrong_file("lesson2", "inactive_free", tmp_path), OVER_ADMITS_WITH_A_SHORTFALL)
    assert "safety" in lost(report) and "efficiency" not in lost(report), scores(report)
    # The shortfall is there (else this secret no longer shows the case: draw another), and
    # the feedback says whose it is.
    assert re.search(r"but for 1 where your ledger told no request to wait that fit and admitted "
                     r"some beyond capacity: what those admissions cost is safety's to show",
                     feedback(report, "efficiency")), feedback(report, "efficiency")


def test_readme_feedback_example_is_what_the_grader_says(tmp_path):
    report = grade("lesson2", wrong_file("lesson2", "prompt_only", tmp_path), "check")
    # The README quotes the prompt-only ledger's safety feedback, in italics.
    quoted = re.search(r"For the prompt-only ledger, for example: \*(.*?)\*", " ".join(README.read_text().split()))
    assert quoted, "the README's feedback example is gone"
    assert quoted.group(1) in feedback(report, "safety")


# ---- other mistakes: graded by the property they break ----------------------------------
OTHERS = {
    # One page short of the promise; at the pool's edge its "can never fit" is wrong too.
    "floor_pages": ({"safety", "reservations"}, {"liveness"}),
    "ignores_evictable": ({"efficiency", "reservations"}, {"liveness"}),  # starves the queue
    "rejects_when_busy": ({"liveness", "efficiency"}, set()),
    "impossible_by_new": ({"liveness"}, set()),
    # Exact fits wait, so a request as large as the whole pool waits forever.
    "strict_less": ({"reservations"}, {"liveness"}),
    "raises_on_hits": (CRITERIA, set()),
    "rejects_everything": (CRITERIA, set()),
    # Never waits: unsafe, and its efficiency is not shown; the pool-sized request it
    # admits can never fit (liveness); its reservations are exact.
    "admits_everything": ({"safety", "efficiency"}, {"liveness"}),
    # The same a call late: told to wait once, admitted at its next call whatever the capacity.
    # Its waits counted as holding back, so it kept efficiency in full (6 of 10, check and
    # grade); asked a probe again, it answers otherwise (see below).
    "waits_once": ({"safety", "efficiency"}, set()),
    # A large request waits for ever though it fits (the whole-pool probe too), and every
    # request behind it in the queue.
    "starves_large": ({"liveness", "efficiency", "reservations"}, set()),
    "rejects_whole_pool": ({"liveness"}, set()),
    # Promises short of max_new_tokens that the public runs' early stops never broke (a probe
    # on the worker of 8-token pages asks for 1,000 output tokens: that one is short too).
    "bets_on_short_outputs": ({"safety"}, {"liveness", "reservations"}),
    "last_slot_free": ({"safety"}, {"reservations", "liveness"}),
    # The same bet at 8,192 output tokens, above every workload's max_new: it kept 10 of 10
    # on the check and on every secret tried (red-team, 2026-12-07) until a public probe and
    # a hidden stream asked for longer outputs (tens to hundreds of thousands of tokens).
    "bets_on_8192_outputs": ({"safety"}, {"reservations", "liveness"}),
    # Pages counted with a shift: right at 16 tokens a page, too many at 12 (the public
    # long-output probes, and the hidden stream's pages of 3 to 100 tokens), so an exact
    # fit waits; it kept 10 of 10 while every probe's page was a power of two.
    "pages_by_shift": ({"reservations"}, {"liveness"}),
    # The public scenarios' page size written in: the probes on a worker of 8-token pages
    # show it in the check (before, every public probe and run had 16-token pages, and it
    # kept 10 of 10 there).
    "page_tokens_16": ({"safety", "reservations", "liveness"}, set()),
    "pool_640": ({"liveness"}, set()),
    # A cap on the requests running: a probe with a hundred running and room for its request.
    "caps_running": ({"reservations"}, set()),
    # The same cap at 256: the public probe many-running, with three hundred running.
    "caps_running_256": ({"reservations"}, set()),
    # Up to two inactive hits taken as free: every public probe's inactive hits were 12 or
    # 32, and it kept 10 of 10 on the check (red team, 2026-12-07) until the public probe
    # one-inactive-short, one page short by its one inactive hit.
    "few_inactive_free": ({"safety"}, {"liveness", "efficiency"}),
    # A page or two admitted whatever the capacity: the public probe all-promised.
    "small_always_fits": ({"safety"}, set()),
    # A watermark of its own: the public probe mostly-promised, an exact fit on a pool promised.
    "promised_watermark": ({"reservations"}, set()),
    # "Can never fit" beside the promises of running requests: the public probe
    # large-while-promised (it lost 0.012 of liveness on the check, from one run request).
    "never_fits_beside_promises": ({"liveness"}, set()),
    # A margin reserved beyond the promise and never checked: over-commits (safety), inexact
    # (reservations), and its margins hold later requests back though it admitted nothing
    # beyond capacity: a shortfall safety's excuse for over-admission does not cover.
    "margin_unchecked": ({"safety", "reservations", "efficiency"}, set()),
    # Exact on the probes alone, told from a run's requests by their scope (public, hidden):
    # the runs' own admissions show it.
    "exact_on_probes_only": ({"reservations"}, {"efficiency"}),
    "overpromises_in_runs": ({"reservations"}, {"efficiency"}),
}


@pytest.mark.parametrize("name,side", [("exact_on_probes_only", r"\d+ of \d+ on an exact fit"),
                                       ("overpromises_in_runs", r"[1-9]\d* of \d+ with room to spare")])
def test_a_ledger_exact_on_the_probes_alone_loses_reservations_in_the_runs(name, side, tmp_path, secret):
    """A probe's scope says public or hidden, a run's request names a tenant: a ledger exact on
    the probes alone kept reservations in full (10 of 10, check and grade), its runs' inexact
    admissions unseen. Every admission a run asks about a request that fits is judged too."""
    path = wrong_file("lesson2", name, tmp_path)
    for report in (grade("lesson2", path, "check"), grade_hidden(path, secret)):
        assert scores(report)["reservations"] == 0, feedback(report, "reservations")
        words = feedback(report, "reservations")
        assert re.search(r"^in the runs, [1-9]\d* of \d+ admissions asked where the request fit were not "
                         r"admitted with exactly its promise \(.*" + side + r".*\); first, on .*: r\d+ ", words), words


def test_a_footprint_of_exactly_the_pool_is_never_rejected(tmp_path, secret):
    """Off by one at the pool's edge: the few requests exactly as large as the pool are a side
    of liveness of their own, not a few among the thousands of requests that fit."""
    path = wrong_file("lesson2", "rejects_whole_pool", tmp_path)
    for report in (grade("lesson2", path, "check"), grade_hidden(path, secret)):
        assert lost(report) == {"liveness"}
        assert scores(report)["liveness"] == 0, feedback(report, "liveness")
        assert "whose footprint is exactly the whole pool and that must wait were rejected" \
            in feedback(report, "liveness")


def test_an_edge_probe_that_fits_now_does_not_dilute_the_edge(tmp_path):
    """Under this secret a hidden probe of another kind lands on the pool's edge by its draw
    and fits now: the ledger rejecting at the edge admits it (it fits before the "can never
    fit" test is asked), and once bought a seventh of liveness back (3 of 7 edge probes
    wrong, over the criterion's floor)."""
    secret = bytes.fromhex("4159073b757051ec")
    drawn = [c for c in L.hidden_probes(secret) if not c.label.startswith("hidden probe whole_pool")
             and footprint(c.inputs[0]) == c.inputs[1].total_pages]
    assert drawn and all(need(c.inputs[0]) <= available(c.inputs[1]) for c in drawn)
    report = grade_hidden(wrong_file("lesson2", "rejects_whole_pool", tmp_path), secret)
    assert scores(report)["liveness"] == 0, feedback(report, "liveness")


def _must_wait(request: dict, ledger: dict) -> tuple[int, bool]:
    """A probe's footprint, and whether it fits the pool but not the capacity available now
    (the README's arithmetic, written out here)."""
    pt = request["page_tokens"]
    pages = -(-(request["prompt_tokens"] + request["max_new_tokens"]) // pt)
    hits, active = request["prefix_hit_pages"], request["prefix_hit_active"]
    room = ledger["unallocated_pages"] + ledger["evictable_pages"] - ledger["reserved_pages"]
    return pages, pages <= ledger["total_pages"] and pages - active > room


def test_a_pool_written_in_loses_liveness_on_the_probes_that_must_wait(tmp_path, secret):
    """The public pool's 640 pages written in for "can never fit" rejects, on a larger pool,
    what must wait there. Among the thousands of run requests that fit it lost 0.006 of
    liveness on the check (one probe); the probes that fit the pool and must wait are a side
    of liveness of their own."""
    path = wrong_file("lesson2", "pool_640", tmp_path)
    hidden = [(vars(c.inputs[0]), vars(c.inputs[1])) for c in L.hidden_probes(secret)]
    public = [(p["request"], p["ledger"]) for p in PROBES()]
    for report, probes in ((grade("lesson2", path, "check"), public),
                           (grade_hidden(path, secret), hidden)):
        waits = [pages for pages, must in (_must_wait(r, v) for r, v in probes) if must]
        rejected = sum(pages > 640 for pages in waits)
        assert waits and rejected, "no probe that must wait on a pool past 640 pages"
        share = 1 - rejected / len(waits)
        assert lost(report) == {"liveness"}
        assert scores(report)["liveness"] <= 1.5 * max(0.0, (share - 0.5) / 0.5) + 1e-4, feedback(report, "liveness")
        assert f"{rejected} of the {len(waits)} probes that fit the pool and must wait were rejected" \
            in feedback(report, "liveness")


def test_the_feedback_on_a_probe_gives_every_field_of_its_ledger(tmp_path):
    """A ledger that waits while many requests run was told the probe's pages alone, so a
    hidden probe could not be asked again from its feedback: the count running is named."""
    path = wrong_file("lesson2", "caps_running", tmp_path)
    words = feedback(grade("lesson2", path, "check"), "reservations")
    assert re.search(r"probe other-worker-fits .*: returned 'wait' with 800 unallocated \+ 0 evictable - 40 "
                     r"promised to running requests = 760 available \(100 running\), and it needs 751", words), words


@pytest.mark.parametrize("name, cap", [("caps_running", 64), ("caps_running_256", 256)])
def test_a_cap_of_its_own_on_the_requests_running_loses_reservations_on_the_hidden_probes(
        name, cap, tmp_path, secret):
    """Drawn among the rest, a hidden probe has at most 64 requests running, so a ledger that
    waited while 256 ran kept 10 of 10 on the grade (and the check, whose busiest probe has
    100). Every secret now has exact fits beside 65 to 512 running requests, each running
    request holding a page or more of what the free capacity leaves."""
    many = [c for c in L.hidden_probes(secret) if c.label.startswith("hidden probe many_running")]
    assert len(many) == 6 and len({c.name for c in L.hidden_probes(secret)}) == len(L.hidden_probes(secret))
    # Each probe draws from a sixth of the range (log-uniform): two are beside more than 256.
    assert sum(1 for c in many if c.inputs[1].running > 256) >= 2
    for case in many:
        r, v = case.inputs
        pages = -(-(r.prompt_tokens + r.max_new_tokens) // r.page_tokens)
        room = v.unallocated_pages + v.evictable_pages - v.reserved_pages
        held = v.total_pages - v.unallocated_pages - v.evictable_pages
        assert pages - r.prefix_hit_active == room and 65 <= v.running <= min(512, held), case.label
    over = sum(1 for c in many if c.inputs[1].running >= cap)
    report = grade_hidden(wrong_file("lesson2", name, tmp_path), secret)
    assert lost(report) == {"reservations"}
    wrong = re.search(r"(\d+) of \d+ probes whose need fits wrong", feedback(report, "reservations"))
    assert wrong and int(wrong.group(1)) >= over >= 1, feedback(report, "reservations")


def test_a_small_request_admitted_whatever_the_capacity_is_unsafe_on_the_hidden_probes(tmp_path, secret):
    """No workload's request is a page or two, and drawn among the others a probe's footprint
    is that small once in a thousand: a ledger that admitted every such request, with or
    without the capacity, kept 10 of 10 under every secret. Every secret now has probes of a
    page or two, a page short of their need."""
    small = [c for c in L.hidden_probes(secret) if c.label.startswith("hidden probe small_short")]
    assert small
    for case in small:
        r, v = case.inputs
        pages = -(-(r.prompt_tokens + r.max_new_tokens) // r.page_tokens)
        room = v.unallocated_pages + v.evictable_pages - v.reserved_pages
        assert pages <= 2 and pages - r.prefix_hit_active == room + 1, case.label
    report = grade_hidden(wrong_file("lesson2", "small_always_fits", tmp_path), secret)
    assert lost(report) == {"safety"} and scores(report)["safety"] == 0
    # The first probe named may be any of a page or two: one drawn among the others is too.
    assert re.search(r"hidden probe \w+: prompt \d+ \+ max_new \d+ at \d+ tokens/page = [12] pages?, .* "
                     r"admitted taking \d pages? of capacity", feedback(report, "safety")), \
        feedback(report, "safety")


def test_a_watermark_on_the_promised_pages_loses_reservations_on_the_hidden_probes(tmp_path, secret):
    """Drawn among the rest, an exact fit came on a pool mostly free: a ledger that held back
    while three quarters of the pool was promised, whatever the need, kept 10 of 10 under
    every secret. Every secret now has exact fits on a pool all promised but the need."""
    crowded = [c for c in L.hidden_probes(secret) if c.label.startswith("hidden probe crowded_promised")]
    assert crowded
    for case in crowded:
        r, v = case.inputs
        room = v.unallocated_pages + v.evictable_pages - v.reserved_pages
        assert v.reserved_pages * 4 > v.total_pages * 3, case.label
        pages = -(-(r.prompt_tokens + r.max_new_tokens) // r.page_tokens)
        assert pages - r.prefix_hit_active == room, case.label
    report = grade_hidden(wrong_file("lesson2", "promised_watermark", tmp_path), secret)
    assert lost(report) == {"reservations"}
    wrong = re.search(r"(\d+) of \d+ probes whose need fits wrong", feedback(report, "reservations"))
    assert wrong and int(wrong.group(1)) >= len(crowded), feedback(report, "reservations")


@pytest.mark.parametrize("name", sorted(OTHERS))
def test_other_mistakes_lose_the_property_they_break(name, tmp_path):
    report = grade("lesson2", wrong_file("lesson2", name, tmp_path), "check")
    must, may = OTHERS[name]
    assert must <= lost(report), f"{name} kept points on {must - lost(report)}"
    assert lost(report) <= must | may, f"{name} lost {lost(report) - must - may}"


@pytest.mark.parametrize("name, criterion", [("bets_on_8192_outputs", "safety"),
                                             ("pages_by_shift", "reservations")])
def test_long_outputs_on_pages_of_no_power_of_two_are_probed_on_every_secret(name, criterion, tmp_path, secret):
    """The hidden probes' own stream of long outputs (16,384 to 262,144 tokens) on pages of
    3 to 100 tokens: a promise capped at 8,192 output tokens is short there, and pages
    counted with a shift are too many. Each loses its criterion on the hidden cases alone."""
    long = [c.inputs[0] for c in L.hidden_probes(secret) if "probe long_" in c.label]
    assert len(long) == 6 and {r.page_tokens for r in long} <= {3, 12, 20, 24, 48, 100}
    assert all(16_384 <= r.max_new_tokens <= 262_144 for r in long)
    hidden = grade_hidden(wrong_file("lesson2", name, tmp_path), secret)
    assert scores(hidden)[criterion] < full(hidden)[criterion], feedback(hidden, criterion)


@pytest.mark.parametrize("name", ["bets_on_short_outputs", "last_slot_free"])
def test_a_promise_short_of_max_new_is_unsafe_though_no_promise_broke(name, tmp_path, secret):
    """Safety judges each admission of a run by its promise, not by the luck of its outputs:
    a ledger that reserved for 512 output tokens at most, or one slot short, broke no promise
    on the public runs (their outputs stopped early) and no public probe asked for more, and
    it kept full marks on the public check."""
    path = wrong_file("lesson2", name, tmp_path)
    for report in (grade("lesson2", path, "check"), grade_hidden(path, secret)):
        assert scores(report)["safety"] == 0, feedback(report, "safety")
    words = feedback(grade("lesson2", path, "check"), "safety")
    assert re.search(r"0 broken promises, 0 over-commits; \d+ admissions? promised fewer pages than the "
                     r"request may allocate by max_new_tokens \(no promise broke on this run only because "
                     r"the outputs stopped before they needed the missing pages\); first, r\d+ reserved "
                     r"(\d+) pages, needed (\d+) \(prompt (\d+) \+ max_new (\d+) at 16 tokens/page", words), words
    reserved, needed, prompt, new = map(int, re.search(r"first, r\d+ reserved (\d+) pages, needed (\d+) "
                                                       r"\(prompt (\d+) \+ max_new (\d+)", words).groups())
    assert needed == -(-(prompt + new) // 16) > reserved


def test_a_request_that_fits_but_is_never_admitted_is_a_liveness_failure(tmp_path):
    # Nothing is rejected: the runs' starved requests alone show it.
    report = grade("lesson2", wrong_file("lesson2", "starves_large", tmp_path), "check")
    words = feedback(report, "liveness")
    starved = re.search(r"(\d+) of \d+ that fit the pool were rejected or never admitted", words)
    assert starved and int(starved.group(1)) > 0, words
    assert re.search(r"r\d+ fits the pool \(prompt \d+ .*\) but was never admitted; last told wait", words), words


def test_a_ledger_that_admits_nothing_is_not_called_safe():
    report = grade("lesson2", L2 / "rejects_everything.py", "check")
    assert report.score == 0
    assert "admitted no request" in feedback(report, "safety")


def test_a_ledger_that_admits_everything_is_not_called_efficient(tmp_path):
    """The mirror image: admitting everything has efficiency for free, as admitting nothing
    has safety; neither earns the criterion it gets for free."""
    report = grade("lesson2", wrong_file("lesson2", "admits_everything", tmp_path), "check")
    assert scores(report)["efficiency"] == 0 and scores(report)["safety"] == 0
    assert "efficiency is not shown by admitting everything" in feedback(report, "efficiency")


def test_a_ledger_that_answers_a_probe_otherwise_when_asked_again_shows_no_efficiency(tmp_path, secret):
    """admit must be a function of its two arguments. One that said wait once and admitted
    the request at its next call, whatever the capacity, told requests to wait in every run
    (so it was not "admitting everything") and kept efficiency in full; the probes, asked a
    second time in reverse order, show that its answers depend on the calls before them."""
    path = wrong_file("lesson2", "waits_once", tmp_path)
    for report in (grade("lesson2", path, "check"), grade_hidden(path, secret)):
        assert scores(report)["efficiency"] == 0
        assert re.search(r"admit answered (hidden )?probe \S+.*: wait, and asked again with the same arguments, "
                         r"admit with \d+ pages?: admit must be a function of its two arguments",
                         feedback(report, "efficiency")), feedback(report, "efficiency")


def test_a_decision_the_worker_cannot_use_is_named_on_every_criterion(tmp_path):
    """'accept' for 'admit': the worker takes it for no decision. Safety once said only that
    the ledger admitted nothing, and reservations that it should admit: each now names the
    answer it could not use."""
    path = write_mutant(L2 / "alt_correct.py", [('        return Admission(decision="admit",',
                                                 '        return Admission(decision="accept",')],
                        tmp_path, "accept")
    report = grade("lesson2", path, "check")
    assert report.score == 0
    for criterion in CRITERIA:
        assert "Admission.decision: 'accept' is not one of admit, wait, reject" in feedback(report, criterion), \
            (criterion, feedback(report, criterion))
    assert "exactly the whole pool and that must wait were rejected" not in feedback(report, "liveness")


def test_the_promise_of_a_wait_or_a_reject_is_not_read(tmp_path, secret):
    """The stub says reserve_pages is read only when the request is admitted. A ledger that
    waits with its shortfall as a negative promise, and rejects with its footprint over the
    pool, is a correct ledger: the probes accepted those answers, and the worker took every
    such wait for no decision and rejected the request: 2.0 of 10 on the check."""
    path = write_mutant(L2 / "alt_correct.py", [
        ('        return Admission(decision="wait", reason=f"short by {promise - spare}")',
         '        return Admission(decision="wait", reserve_pages=spare - promise, reason="short")'),
        ('    return Admission(decision="reject", reason="larger than the device")',
         '    return Admission(decision="reject", reserve_pages=-whole, reason="larger than the device")'),
    ], tmp_path, "promise_on_wait")
    for report in (grade("lesson2", path, "check"), grade_hidden(path, secret)):
        assert report.score == report.max_score, [c.feedback for c in report.criteria if not c.passed]


def test_holding_back_on_the_probes_alone_is_not_efficiency(tmp_path, secret):
    """A probe's request is told from a workload's by its scope, so a ledger can wait on the
    probes and admit every request of a run. Efficiency is measured on the runs, and a probe
    where it held back once said it was shown there: the runs' own decisions decide now."""
    path = write_mutant(L2 / "alt_correct.py", [("    if promise <= spare:\n",
                                                 "    if promise <= spare or request.scope not in ('public', 'hidden'):\n")],
                        tmp_path, "holds_back_on_probes_only")
    for report in (grade("lesson2", path, "check"), grade_hidden(path, secret)):
        # Right on every probe: its reservations and its probes' safety are a correct ledger's.
        assert scores(report)["reservations"] == full(report)["reservations"]
        assert scores(report)["efficiency"] == 0 and scores(report)["safety"] == 0
        assert "efficiency is not shown by admitting everything" in feedback(report, "efficiency")


def test_a_crashing_admit_is_named_in_the_feedback(tmp_path):
    report = grade("lesson2", wrong_file("lesson2", "raises_on_hits", tmp_path), "check")
    assert "raised ValueError: hits not handled" in feedback(report, "safety")


def test_every_mutant_is_a_wrong_ledger_with_its_expectations():
    """Every wrong ledger but rejects_everything is a mutant of alt_correct.py (mutants.yaml)."""
    assert set(mutations("lesson2")) <= set(WRONG) | set(OTHERS)


# ---- cases ---------------------------------------------------------------------------------
def test_public_cases_are_the_five_families_and_the_probe_file():
    cases = L.public_cases(find_course(str(ROOT)))
    names = {c.name for c in cases if c.family == "scenario"}
    assert names == {"heavy-load", "long-outputs", "prefix-multiscope", "bursts", "never-fit"}
    probes = [c for c in cases if c.family == "probe"]
    assert len(probes) == len(PROBES())
    # The bare workloads the scenarios name stay loadable on their own.
    for path in PUBLIC.glob("*.scenario.yaml"):
        workload = yaml.safe_load(path.read_text())["workload"]
        assert load_workload(PUBLIC / workload).requests >= 50


def test_hidden_probes_are_worker_shaped_and_sit_on_every_boundary(secret):
    probes = L.hidden_probes(secret)
    seen = set()
    for case in probes:
        r, v = case.inputs
        assert L._consistent(r, v) == "", case.label
        fits, imp = L.need(r) <= L.available(v), L.footprint(r) > v.total_pages
        seen.add("fits" if fits else "impossible" if imp else "waits")
        if L.need(r) == L.available(v):
            seen.add("exact")
            if r.prefix_hit_active:
                seen.add("exact with active hits")
        if L.need(r) == L.available(v) + 1:
            if L.inactive(r) and v.reserved_pages == 0:
                seen.add("short by inactive hits")
            if v.reserved_pages:
                seen.add("short with reservations")
        if imp and L.promise(r) <= v.total_pages:
            seen.add("impossible with hits")
        if L.footprint(r) == v.total_pages:
            seen.add("whole pool" if fits else "whole pool, busy")
        if (r.prompt_tokens + r.max_new_tokens) % r.page_tokens == 0:
            seen.add("page multiple")
    assert seen >= {"fits", "waits", "impossible", "exact", "exact with active hits",
                    "short with reservations", "impossible with hits", "whole pool",
                    "whole pool, busy", "page multiple"}, seen


# A secret whose hidden probes once held a whole-pool request on a busy pool with no request
# running (found by a scan of secrets): 1,132 of 2,657 pages held, by nobody.
IDLE_YET_BUSY = b"sec39"


def test_a_ledger_that_reads_no_running_request_as_an_idle_pool_keeps_full_marks(tmp_path, secret):
    """Only running requests hold or are promised pages, so with none running the pool is
    all free, and what does not fit it now never will: a ledger may reject it then. The hidden
    probes drew running 0 beside pages held by nobody, which no worker shows, and such a
    ledger lost 0.5 of liveness under IDLE_YET_BUSY (a request that fits the pool, rejected)."""
    path = write_mutant(L2 / "alt_correct.py", [("    if whole <= ledger.total_pages:\n",
                                                 "    if whole <= ledger.total_pages and ledger.running:\n")],
                        tmp_path, "idle_rejects")
    for s in (IDLE_YET_BUSY, secret):
        report = grade_hidden(path, s)
        assert report.score == report.max_score, [c.feedback for c in report.criteria if not c.passed]


def test_a_probe_with_no_request_running_has_an_idle_pool():
    r = L.AdmissionRequest(id="p", scope="s", prompt_tokens=100, max_new_tokens=40, page_tokens=16,
                           prefix_hit_pages=0, prefix_hit_active=0)
    idle = dict(total_pages=64, unallocated_pages=60, evictable_pages=4, reserved_pages=0, running=0)
    assert L._consistent(r, L.LedgerView(**idle)) == ""
    for change in ({"unallocated_pages": 59}, {"reserved_pages": 1}):
        assert "with no request running, no page is held or promised" in L._consistent(
            r, L.LedgerView(**{**idle, **change}))
        assert L._consistent(r, L.LedgerView(**{**idle, **change, "running": 1})) == ""


def test_hidden_cases_depend_on_the_secret_and_only_on_it(secret):
    course = find_course(str(ROOT))
    digests = lambda s: [c.digest for c in L.hidden_cases(s, course)]
    assert digests(secret) == digests(secret)
    assert set(digests(secret)).isdisjoint(digests(other_than(secret)))
    names = {c.name.split("#")[0] for c in L.hidden_cases(secret, course) if c.family == "scenario"}
    assert names == {"heavy-load", "long-outputs", "prefix-multiscope", "bursts", "never-fit"}


def _never_fit_ids(case) -> list[str]:
    """Requests of a scenario that can never fit its pool and reach admission, counted here
    from the shape rules the never-fit sheet enforces and the pool's size in pages."""
    s = case.inputs
    pool, pt = runs.Geometry.of(s.model, s.worker).pool_pages, s.worker.page_tokens
    return [r.id for r in s.requests()
            if r.prompt_tokens > 0 and r.max_new_tokens > 0 and r.cancel_at_s is None
            and r.prompt_tokens + r.max_new_tokens <= s.model.max_context
            and -(-(r.prompt_tokens + r.max_new_tokens) // pt) > pool]


def test_every_secret_gives_liveness_a_run_with_a_request_that_can_never_fit(secret):
    cases = [c for c in L.hidden_cases(secret, find_course(str(ROOT))) if c.name.startswith("never-fit")]
    assert len(cases) == 1 and _never_fit_ids(cases[0])


# A secret whose first never-fit instance (found by a random-secret run) draws no request
# that can never fit: its one 9,728-token prompt has 61 tokens of max_new, 612 pages of a
# 620-page pool. Liveness would have had no run evidence under it.
NOTHING_IMPOSSIBLE = bytes.fromhex("1f97fb68a5ffba23")


def test_a_never_fit_instance_with_nothing_impossible_is_replaced_from_the_reserve():
    from grader.course.scenario import hidden_scenarios
    course = find_course(str(ROOT))
    drawn = hidden_scenarios(course, "lesson2", NOTHING_IMPOSSIBLE)
    first = next(c for c in drawn if c.name.startswith("never-fit"))
    assert first.name == "never-fit#0" and not _never_fit_ids(first)     # the premise
    cases = [c for c in L.hidden_cases(NOTHING_IMPOSSIBLE, course) if c.family == "scenario"]
    kept = next(c for c in cases if c.name.startswith("never-fit"))
    assert kept.name != first.name and _never_fit_ids(kept)
    assert [c for c in cases if c is not kept] == [c for c in drawn if c is not first]


def test_a_family_no_instance_serves_stops_the_grade(monkeypatch):
    monkeypatch.setattr(L, "_never_fit", lambda s: False)
    with pytest.raises(InputError, match=r"lesson2\.yaml: families\.never-fit.*can never fit"):
        L.hidden_cases(SECRET_OF_TESTS, find_course(str(ROOT)))


def test_design_sheet_section_holds_the_ledger_knobs_at_their_design_values():
    import inspect
    from reference import knobs
    sheet = yaml.safe_load((ROOT / "assignments/lesson2/design_sheet.yaml").read_text())
    section = sheet["admission_ledger"]
    design = {name: p.default for name, p in inspect.signature(knobs.ledger_knobs).parameters.items()
              if p.kind is p.KEYWORD_ONLY}
    assert section == {**design, "prefix_cache": True}
    assert reference_policy(sheet).prefix_cache is True


# ---- the README --------------------------------------------------------------------------
def test_readme_walkthrough_runs_as_written(tmp_path):
    text = README.read_text()
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    printed = re.search(r"A correct ledger prints:\n\n```\n(.*?)```", text, re.S).group(1)
    exercise = tmp_path / "assignments" / "lesson2"
    exercise.mkdir(parents=True)
    (exercise / "exercise.py").write_text(REFERENCE.read_text())
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, check=True).stdout
    assert out == printed


def test_readme_probes_match_the_reference_and_the_calculations():
    probes = {p["name"]: p for p in PROBES()}
    want = {"worked-1-wait": ("wait", 0), "worked-1-admit": ("admit", 9), "page-multiple": ("admit", 8),
            "worked-2-active": ("admit", 18), "worked-2-inactive": ("wait", 0),
            "worked-2-mixed": ("wait", 0), "active-exact-fit": ("admit", 18),
            "inactive-exact-fit": ("admit", 18), "inactive-one-short": ("wait", 0),
            "one-inactive-short": ("wait", 0), "two-inactive-exact-fit": ("admit", 18),
            "worked-3-never-fits": ("reject", 0), "never-fits-with-hits": ("reject", 0),
            "worked-4-whole-pool": ("admit", 640), "whole-pool-busy": ("wait", 0)}
    for name, (decision, pages) in want.items():
        p = probes[name]
        a = reference_ledger.admit(L.AdmissionRequest(id=name, scope="s", **p["request"]),
                                   L.LedgerView(**p["ledger"]))
        assert (a.decision, a.reserve_pages) == (decision, pages), name


def test_readme_table_of_mistakes_is_what_the_worker_records():
    course = find_course(str(ROOT))
    text = " ".join(README.read_text().split())

    def run(scenario, **knobs):
        s = load_scenario(PUBLIC / f"{scenario}.scenario.yaml", course)
        return s.run(reference_policy({**s.sheet, "admission_ledger": knobs}))

    heavy = run("heavy-load", reserve="prompt_only")
    broken = [v for v in heavy.violations if v.kind == "broken_promise"]
    preempted = sum(r.preemptions > 0 for r in heavy.requests)
    assert (len(broken), preempted, broken[0].requests[0]) == (14, 14, "r17")
    assert "14 broken promises (14 requests preempted and recomputed), the first one r17's" in text
    bursts = run("bursts", outstanding="ignore").counts()
    assert (bursts["over_commit"], bursts["broken_promise"]) == (60, 3)
    assert "60 over-commits and 3 broken promises" in text
    assert run("prefix-multiscope", inactive_hits="free").counts()["over_commit"] == 6
    assert "6 over-commits, each when a request reactivated" in text
    good = lambda r: sum(met_slo(x) for x in r.requests)
    assert good(run("prefix-multiscope", active_hits="as_new")) == 94
    assert good(run("prefix-multiscope")) == 118
    assert "94 requests met their SLO instead of 118 (79.7%)" in text
    assert sum(runs.stuck(r) for r in run("never-fit", impossible="wait").requests) == 66
    assert "66 of 80 requests never admitted" in text
    correct = run("never-fit")
    assert sum(r.outcome == "rejected" for r in correct.requests) == 3
    assert "the 3 that can't were rejected" in text


# ---- good requests: counted from the compact records, checked one record at a time ----------
def met_slo(rec) -> bool:
    """The definition, one record at a time: completed, first token within ttft_s of arrival,
    no gap between two tokens over gap_s."""
    if rec.outcome != "completed" or rec.first_token_s is None:
        return False
    if rec.first_token_s - rec.arrival_s > rec.slo.ttft_s:
        return False
    times = rec.token_times
    return all(b - a <= rec.slo.gap_s for a, b in zip(times, times[1:]))


def test_good_requests_counts_what_each_record_shows_on_every_scenario():
    course = find_course(str(ROOT))
    knobs = [{}, {"reserve": "prompt_only"}, {"outstanding": "ignore"}, {"active_hits": "as_new"},
             {"impossible": "wait"}]
    counted = 0
    for path in sorted(PUBLIC.glob("*.scenario.yaml")):
        s = load_scenario(path, course)
        for k in knobs:
            requests = s.run(reference_policy({**s.sheet, "admission_ledger": k})).requests
            want = sum(met_slo(r) for r in requests)
            assert runs.good_requests(requests) == want, (path.name, k)
            assert runs.good_requests(tuple(requests)) == want, (path.name, k)
            counted += want
    assert counted > 1000      # the runs hold good requests, and (below) bad ones


def test_good_requests_at_the_edges():
    from dataclasses import replace
    from reference.shapes import RequestRecord, Slo
    base = RequestRecord(id="r", scope="s", cls="c", slo=Slo(ttft_s=1.0, gap_s=0.5), arrival_s=2.0,
                         outcome="completed", prompt_tokens=8, max_new_tokens=4, tokens_out=3,
                         token_times=(2.5, 3.0, 3.5), first_token_s=2.5)
    edge = {
        "fine": base,
        "gap exactly at the SLO": replace(base, token_times=(2.5, 3.0)),
        "one gap over": replace(base, token_times=(2.5, 3.0, 3.5000001)),
        "first token exactly at ttft": replace(base, first_token_s=3.0, token_times=(3.0,)),
        "first token late": replace(base, first_token_s=3.0001, token_times=(3.0001,)),
        "no tokens": replace(base, token_times=()),
        "no first token": replace(base, first_token_s=None, token_times=()),
        "cancelled": replace(base, outcome="cancelled"),
        "a gap of no number": replace(base, slo=Slo(ttft_s=1.0, gap_s=float("nan"))),
    }
    records = list(edge.values())
    for name, rec in edge.items():
        assert runs.good_requests((rec,)) == met_slo(rec), name
    # In every order, so a request's first token always follows another's last: the step
    # between two requests is no gap, whichever ends the run (a tokenless one included).
    for shift in range(len(records)):
        order = tuple(records[shift:] + records[:shift])
        assert runs.good_requests(order) == sum(met_slo(r) for r in order) == 4, shift


def test_fit_classes_skips_a_request_the_contract_refuses_and_classifies_the_rest():
    # Which requests can never fit is a property of the workload and the worker; a request
    # the contract refuses is neither, and the requests after it are still classified.
    from types import SimpleNamespace
    from grader.course.scenario import public_scenarios
    from reference.shapes import RequestView, Slo
    from reference.sizing import Geometry
    never_fit = next(c.inputs for c in public_scenarios(find_course(str(ROOT)), "lesson2") if c.name == "never-fit")
    pool, pt = Geometry.of(never_fit.model, never_fit.worker).pool_pages, never_fit.worker.page_tokens
    assert pool * pt + 1 <= never_fit.model.max_context     # too big for the pool, not for the model

    def request(i, prompt, new, cancel=None):
        view = RequestView(f"r{i}", "s", prompt, new, Slo(1.0, 0.1))
        return SimpleNamespace(id=f"r{i}", prompt_tokens=prompt, max_new_tokens=new, cancel_at_s=cancel,
                               view=lambda: view)
    workload = [request(0, 0, 5),                       # an empty prompt: the contract refuses it
                request(1, 100, 10),
                request(2, pool * pt, 1),               # one page more than the pool
                request(3, pool * pt, 1, cancel=0.5),   # the same, cancelled first: no evidence
                request(4, pt, pt)]
    s = SimpleNamespace(sheet=never_fit.sheet, model=never_fit.model, worker=never_fit.worker,
                        requests=lambda: workload)
    assert runs.fit_classes(s) == (("r2",), ("r1", "r4"))


def test_what_crosses_from_a_run_is_frozen_and_an_oracle_run_reads_back_as_itself():
    import dataclasses
    from grader.engine import codec
    summary = runs.OracleRun(7, ("a",), ("b", "c"))
    assert codec.loads(codec.dumps(summary)) == summary
    with pytest.raises(dataclasses.FrozenInstanceError):
        summary.good = 8
    with pytest.raises(dataclasses.FrozenInstanceError):
        runs.LearnerRun(None, None, runs.Book()).run = None


@pytest.mark.parametrize("body,first", [
    ("raise ValueError('oops')", "admit raised ValueError: oops"),
    ("return 'admit'", "expected Admission"),
])
def test_an_admit_with_no_usable_answer_is_told_so_not_described_as_a_ledger(tmp_path, body, first):
    """Every probe failed: efficiency once said such a ledger 'admitted every request'. Each
    run criterion now says what happened, and no worker run is made for it."""
    p = tmp_path / "broken.py"
    p.write_text(f"def admit(request, ledger):\n    {body}\n")
    report = grade("lesson2", p, "check")
    for c in report.criteria:
        assert c.score == 0, c
    for cid in ("safety", "efficiency", "liveness"):
        feedback = next(c.feedback for c in report.criteria if c.id == cid)
        assert feedback.startswith("admit gave no usable answer on any of the") and first in feedback, feedback
        assert "admitted every request" not in feedback and "admitted no request" not in feedback


def test_the_readmes_replay_command_gives_the_tables_row(tmp_path):
    """The command the README gives for replaying a faulty knob, run as written (from the
    course folder, on a copy of the sheet with the knob set): the row's count and its
    first victim, as the table and the sentence after the command say."""
    text = README.read_text()
    [line] = [l for l in text.splitlines() if l.startswith("grader sheet run prompt_only.yaml")]
    sheet = (ROOT / "assignments" / "design_sheet.yaml").read_text()
    faulty = sheet.replace("\n  reserve: prompt_and_output", "\n  reserve: prompt_only", 1)
    assert faulty != sheet
    (tmp_path / "prompt_only.yaml").write_text(faulty)
    args = line.split()[1:]
    args[2] = str(tmp_path / "prompt_only.yaml")
    p = subprocess.run([sys.executable, "-m", "grader.cli", *args], cwd=ROOT, capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    assert "violations: broken_promise 14\n" in p.stdout
    assert "first broken_promise: r17, r23 at 1.253 s (seed 7)" in p.stdout
    assert "for this row, r17 at 1.253 s" in " ".join(text.split())


def test_the_impossible_row_replays_as_the_readme_says(tmp_path):
    """The README's replay of `impossible: wait`: a copy of the sheet with the knob set and
    `over_pool` left out of the contract's reasons gives the table's 66 of 80 never
    admitted; with `over_pool` kept, the contract rejects the three first and `wait`
    changes nothing, which is why the README asks for both changes."""
    text = " ".join(README.read_text().split())
    assert "also leave `over_pool` out of your copy's `request_contract.reasons`" in text
    sheet = (ROOT / "assignments" / "design_sheet.yaml").read_text()
    waits = sheet.replace("\n  impossible: reject", "\n  impossible: wait", 1)
    assert waits != sheet

    def replay(text: str) -> str:
        path = tmp_path / "impossible_wait.yaml"
        path.write_text(text)
        p = subprocess.run([sys.executable, "-m", "grader.cli", "sheet", "run", str(path), "--workload",
                            str(PUBLIC / "never-fit.scenario.yaml"), "--seeds", "17"],
                           cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, p.stderr
        return p.stdout

    kept = replay(waits)
    assert "completed 77 of 80 requests" in kept
    left_out = re.sub(r"\n    - over_pool [^\n]*", "", waits, count=1)
    assert left_out != waits
    assert "completed 14 of 80 requests" in replay(left_out)      # 66 of 80 never admitted

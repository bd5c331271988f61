"""Lesson 4 graded end to end: each mistake loses the criteria that name it, and only those."""
import ast
import hashlib
import importlib.util
import random
import re
from itertools import product
from pathlib import Path

import pytest

import mutants
from conftest import ROOT, SUBMISSIONS, full, grade, other_than, scores
from grader.engine.layout import find_course
from grader.lessons import lesson4
from grader.lessons.cancellation_runs import early_releases
from grader.lessons.publishing import may_publish
from grader.engine.checks import CheckContext
from grader.lessons import transition_table
from grader.lessons.transition_table import TableFaults
from grader.engine.pipeline import grade_submission
from grader.course.scenario import hidden_scenarios
from grader.engine.submission import load_submission
from grader.engine.oracle import lesson_policy, reference_decisions, reference_policy
from reference.shapes import EVENTS, STATES
from reference.solutions import lesson4 as ref

L4 = SUBMISSIONS / "lesson4"
REFERENCE = ROOT / "reference" / "solutions" / "lesson4.py"
TABLE = {"table-no-release-while-pinned", "table-cancel-stops", "table-reclaim-at-fence",
         "table-release-once", "table-terminal"}


def wrong_file(name: str, folder: Path) -> Path:
    """A wrong solution: plain_correct.py with the mutations mutants.yaml lists for ``name``."""
    return mutants.wrong_file("lesson4", name, folder)


def _module(name, folder, path=None):
    """The submission ``name`` (or the file at ``path``) imported in this process."""
    spec = importlib.util.spec_from_file_location(f"l4_{name}", path or wrong_file(name, folder))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _table(on_event):
    return {k: on_event(*k) for k in product(STATES, EVENTS, (False, True))}


# ---- whole submissions through the pipeline ---------------------------------------------
# Every expectation of the hidden cases holds under each of conftest's secrets (`secret`).
@pytest.fixture(scope="module")
def reference_grade(secret):
    return grade("lesson4", REFERENCE, "grade", secret)


def test_reference_full_marks_public_and_hidden(reference_grade):
    assert reference_grade.score == reference_grade.max_score == 24
    kinds = {(c["family"], c["visibility"]) for c in reference_grade.cases}
    assert {("scenario", "hidden"), ("key", "hidden"), ("publish", "hidden")} <= kinds
    public = grade("lesson4", REFERENCE, "check")
    assert public.score == public.max_score
    assert all(c["visibility"] == "public" for c in public.cases)


# plain_correct.py with a key that escapes each field, the escape itself included, then joins
# the fields with '|': the key search forges separators escaped while their escape is not, and
# an encoding that escapes both keeps full marks.
ESCAPED_KEY = (("""    h = hashlib.sha256()
    for part in (scope, parent_key):
        data = part.encode("utf-8")
        h.update(len(data).to_bytes(8, "little") + data)
    h.update(",".join(map(str, block_tokens)).encode())
    return h.hexdigest()
""", r"""    escaped = [f.replace("\\", "\\\\").replace("|", "\\|") for f in (scope, parent_key)]
    text = "|".join((*escaped, ",".join(map(str, block_tokens))))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
"""),)


@pytest.mark.parametrize("name", ["alt_correct", "plain_correct", "alt_table", "escaped_key"])
def test_different_correct_solution_keeps_full_marks(name, secret, tmp_path):
    path = (mutants.write_mutant(L4 / "plain_correct.py", ESCAPED_KEY, tmp_path, name)
            if name == "escaped_key" else L4 / f"{name}.py")
    report = grade("lesson4", path, "grade", secret)
    assert report.score == report.max_score, [c.feedback for c in report.criteria if not c.passed]


# Which criteria each wrong solution must lose (on the public cases alone); it keeps every other.
WRONG = {
    "release_at_cancel": {"table-no-release-while-pinned", "run-no-use-after-free"},
    "never_release_cancelled": {"table-reclaim-at-fence", "run-reclaim-at-fence"},
    "lazy_release": {"table-reclaim-at-fence", "run-reclaim-at-fence"},
    "release_twice": {"table-release-once", "run-release-once"},
    "schedule_after_cancel": {"table-cancel-stops", "run-stop-after-cancel"},
    "key_without_scope": {"key-scope-separation", "run-hits-in-scope"},
    "key_separator": {"key-scope-separation"},
    "key_normalized": {"key-scope-separation"},
    "key_without_parent": {"key-position"},
    "key_token_join": {"key-position"},
    # A key that never hits shows no hit in scope either.
    "key_salted": {"key-deterministic", "run-hit-rate", "run-hits-in-scope"},
    "key_builtin_hash": {"key-deterministic"},
    # Numbered as met: one process agrees with itself, and its numbers are no collision.
    "key_numbered": {"key-deterministic"},
    # Salted by what a process has and its inputs do not, the same in both of a grade's
    # processes but for the restarted one's other ids and later clock (before: 24 of 24).
    "key_pid_salted": {"key-deterministic"},
    "key_year_salted": {"key-deterministic"},
    "publish_unwritten": {"publishable-pages", "run-clean-publish"},
    "publish_partial": {"publishable-pages", "run-clean-publish"},
    # An end no worker path produces today, judged all the same: it leaks.
    "finish_pinned_kept_running": {"table-reclaim-at-fence"},
    # The same end released at once, under the step that still pins the pages.
    "finish_pinned_released": {"table-no-release-while-pinned"},
    # Encodings ambiguous only on inputs built for their own framing (the grader's search).
    "key_raw_scope": {"key-scope-separation"},
    "key_nul_scope": {"key-scope-separation"},
    "key_decimal_lengths": {"key-scope-separation"},
    "key_raw_parent": {"key-position"},
    # A separator escaped in each field while the escape is not: a field that ends in the
    # escape, or holds the code the separator is written as (before: 24 of 24).
    # A rare separator, hidden inside the hash, breaks as '|' does (before: 24 of 24).
    "key_rare_separator": {"key-scope-separation"},
    "key_half_escape": {"key-scope-separation"},
    "key_code_escape": {"key-scope-separation"},
    # Lossy or short keys: scopes a transcoding or a cut merges, a length that wraps, and a
    # digest too short to keep a busy cache's blocks apart (judged on the key space shown).
    "key_ascii_replace": {"key-scope-separation"},
    "key_scope_cut": {"key-scope-separation"},
    "key_length_wraps": {"key-scope-separation"},
    "key_short_digest": {"key-scope-separation"},
    "key_short_digest_tagged": {"key-scope-separation"},
    # Short on one class of input only (page-long blocks), whole elsewhere: judged on each
    # length its keys come in, not on the longest key (before: 24 of 24).
    "key_short_on_pages": {"key-scope-separation"},
    # A long digest of the scope beside a short one of the position: judged on one scope's keys.
    "key_scope_then_checksum": {"key-position"},
    "key_block_summary": {"key-position"},
    # Some of the tokens: blocks one token apart anywhere in a page (or two).
    "key_last_tokens": {"key-position"},
    # Entries of an ended request no worker path reaches, judged all the same.
    "launch_revives": {"table-cancel-stops"},
    "renotify_on_cancel": {"table-cancel-stops"},
    # A finish that tells the client of a cancel: no run can show it (before: 24 of 24).
    "finish_notifies": {"table-cancel-stops"},
}
# Consequences a mistake may also cost: fewer pages published or usable keys share less.
MAY_ALSO = {
    "publish_positions": ({"publishable-pages"}, {"run-hit-rate"}),
    # It embeds the scope's text too: a 520-character scope outgrows 512 characters.
    "key_grows": ({"key-position", "key-scope-separation"}, {"run-hit-rate"}),
}
# A hit on another tenant's page is no hit: a key that finds those may find fewer of its own.
ALSO = {"key_without_scope": {"run-hit-rate"}}


def _lost(report) -> set:
    got, top = scores(report), full(report)
    return {k for k in got if got[k] < top[k]}


@pytest.mark.parametrize("name", sorted(WRONG) + sorted(MAY_ALSO))
def test_wrong_solution_loses_where_it_is_wrong(name, tmp_path):
    must, may = (WRONG[name], ALSO.get(name, set())) if name in WRONG else MAY_ALSO[name]
    report = grade("lesson4", wrong_file(name, tmp_path), "check")
    lost = _lost(report)
    assert must <= lost, f"{name} kept points on {must - lost}"
    assert lost <= must | may, f"{name} lost points it did not earn losing: {lost - must - may}"
    for c in report.criteria:
        if c.id in must:
            assert c.feedback and "not implemented" not in c.feedback, c


def _publish_feedback(tmp_path, body: str) -> str:
    path = tmp_path / "mine.py"
    path.write_text((SUBMISSIONS / "lesson4" / "plain_correct.py").read_text() + "\n\n" + body)
    (c,) = [c for c in grade("lesson4", path, "check").criteria if c.id == "publishable-pages"]
    assert c.score == 0
    return c.feedback


def test_publishable_feedback_names_the_first_index_returned_that_was_never_offered(tmp_path):
    feedback = _publish_feedback(tmp_path, (
        "def publishable(pages):\n"
        "    top = max(p.index for p in pages)\n"
        "    return (top + 1001, top + 1000)\n"))
    named = int(re.search(r"returned index (\d+), not the index of an offered page", feedback)[1])
    offered = ast.literal_eval(re.search(r"offered page \((\[[\d, ]*\])\)", feedback)[1])
    assert named == max(offered) + 1001, feedback


def test_publishable_feedback_names_the_lowest_page_left_out(tmp_path):
    feedback = _publish_feedback(tmp_path, "def publishable(pages):\n    return ()\n")
    named = int(re.search(r"leaves out page (\d+) \(full, written, not published\)", feedback)[1])
    expected = ast.literal_eval(re.search(r"expected (\[[\d, ]*\])", feedback)[1])
    assert len(expected) > 1 and named == min(expected), feedback


# What a mistake may also cost on some hidden scenarios, drawn by some secrets and not others.
HIDDEN_MAY_ALSO = {
    # A page offered before its write and chosen is refused and never offered again, so its
    # prefix is lost to the requests after it: where a drawn scenario reuses that prefix
    # enough, the prefix hits fall below the target too.
    "publish_unwritten": {"run-hit-rate"},
}


@pytest.mark.parametrize("name", ["release_at_cancel", "key_without_scope", "publish_unwritten"])
def test_hidden_cases_alone_catch_the_mistake(name, tmp_path, secret):
    """Graded on hidden cases only (the table needs none): the same criteria are lost."""
    course = find_course(str(ROOT))
    hidden = lesson4.hidden_cases(secret, course)
    report = grade_submission("lesson4", load_submission(wrong_file(name, tmp_path)), course, mode="grade",
                              cases=hidden)
    must, may = WRONG[name], ALSO.get(name, set()) | HIDDEN_MAY_ALSO.get(name, set())
    assert must <= _lost(report) <= must | may, _lost(report)
    assert all(c["visibility"] == "hidden" for c in report.cases)


# Publishes every third full written page: keys right, hits lost to publishing.
EVERY_THIRD_PAGE = (("""def publishable(pages):
    return tuple(p.index for p in pages if p.prompt_tokens == p.page_tokens
                 and p.written_tokens >= p.page_tokens and not p.published)
""", """def publishable(pages):
    return tuple(p.index for p in pages if p.prompt_tokens == p.page_tokens
                 and p.written_tokens >= p.page_tokens and not p.published and p.index % 3 == 0)
"""),)


def _hits_in_process(scenario, module, functions) -> int:
    """The scenario's prefix hits with ``functions`` of ``module`` called in this process
    (the worker's own keys and publishing for those not named): no sandbox, no table read."""
    run = scenario.run(lesson_policy({f: getattr(module, f) for f in functions}, scenario.sheet))
    hits = run.series["prefix_hits"]
    return int(hits[-1]) if len(hits) else 0


def test_hits_are_judged_under_the_learners_own_table(tmp_path):
    """The oracle's hits are the reference's run, fence included. A table that releases at
    the cancel gives other pages back, and a drawn scenario then has fewer hits to find with
    right keys (secret 8401c9d983ccf07a: bursts, 1152 of 1221): that lost run-hit-rate, the
    table's mistake charged to keys and publishing. Keys and publishing are now judged against
    exact ones under the learner's table where that finds fewer."""
    course = find_course(str(ROOT))
    hidden = lesson4.hidden_cases(bytes.fromhex("8401c9d983ccf07a"), course)
    early = wrong_file("release_at_cancel", tmp_path)
    report = grade_submission("lesson4", load_submission(early), course, mode="grade", cases=hidden)
    hit = next(c for c in report.criteria if c.id == "run-hit-rate")
    assert hit.score == hit.max_score, hit.feedback
    # Keys right under any table find what exact keys find under it: the same run.
    early_mod, right = _module("release_at_cancel", tmp_path), _module("plain_correct", tmp_path)
    scenarios = [c for c in hidden if c.family == "scenario"]
    for c in scenarios:
        assert (_hits_in_process(c.inputs, early_mod, ("on_event", "prefix_key", "publishable"))
                == _hits_in_process(c.inputs, early_mod, ("on_event",))), c.name
    # With publishing wrong as well, the criterion names both figures on a scenario where the
    # table left fewer hits than the oracle's run, and pays hits over the table's.
    both = mutants.write_mutant(SUBMISSIONS / "lesson4" / "plain_correct.py",
                                tuple(mutants.mutations("lesson4")["release_at_cancel"]) + EVERY_THIRD_PAGE,
                                tmp_path, "both")
    both_mod = _module("both", tmp_path, both)
    trio = ("on_event", "prefix_key", "publishable")
    fewer = [c for c in scenarios if _hits_in_process(c.inputs, early_mod, ("on_event",))
             < _hits_in_process(c.inputs, right, trio)]
    assert fewer, "no drawn scenario where releasing at the cancel leaves fewer hits"
    for c in fewer:
        got = _hits_in_process(c.inputs, both_mod, trio)
        table = _hits_in_process(c.inputs, early_mod, ("on_event",))
        want = _hits_in_process(c.inputs, right, trio)
        report = grade_submission("lesson4", load_submission(both), course, mode="grade", cases=[c])
        hit = next(x for x in report.criteria if x.id == "run-hit-rate")
        assert hit.feedback.startswith(
            f"{c.where}: {got} prefix hits in scope and in place; under your on_event the worker's "
            f"exact keys and publishing found {table} (the oracle's run, which releases at the "
            f"fence, {want}) ({got / table:.0%}; at least 95% is the target)"), hit.feedback
        assert "released pages before the step" not in hit.feedback


def test_a_key_numbered_as_met_is_caught_on_the_probes_alone(tmp_path):
    """Asked in the same order in both processes, the probes' inputs got the same numbers,
    so a key numbered as its inputs are met passed key-deterministic when nothing else had
    asked the process for a key first (it was caught only because a run came before)."""
    course = find_course(str(ROOT))
    report = grade_submission("lesson4", load_submission(wrong_file("key_numbered", tmp_path)), course,
                              mode="check", cases=lesson4.public_probes(course))
    got = {c.id: c for c in report.criteria}
    assert got["key-deterministic"].score == 0, got["key-deterministic"].feedback
    assert "in a second process" in got["key-deterministic"].feedback
    assert all(got[i].score == got[i].max_score for i in ("key-scope-separation", "key-position")), got


# ---- feedback names what broke -------------------------------------------------------------
def test_use_after_free_feedback_shows_the_timeline(tmp_path):
    report = grade("lesson4", wrong_file("release_at_cancel", tmp_path), "check")
    line = next(c.feedback for c in report.criteria if c.id == "run-no-use-after-free")
    for words in ("cancel of r", "during step", "released at", "given to r", "overwritten by step"):
        assert words in line, line
    table = next(c.feedback for c in report.criteria if c.id == "table-no-release-while-pinned")
    assert "on_event('running', 'cancel', True)" in table and "still pins" in table, table


def test_determinism_feedback_names_the_second_process(tmp_path):
    report = grade("lesson4", wrong_file("key_builtin_hash", tmp_path), "check")
    line = next(c.feedback for c in report.criteria if c.id == "key-deterministic")
    assert "another" in line and "hash" in line, line


# ---- the table model checker, in process ------------------------------------------------------
def test_reference_table_keeps_every_invariant_for_its_design_values():
    faults = TableFaults(_table(ref.on_event))
    assert all(not found for found in faults.found.values()), faults.found


@pytest.mark.parametrize("release,rule", [("at_cancel", "pinned"), ("never", "reclaim")])
def test_the_lesson_faulty_knobs_break_their_invariant(release, rule):
    from reference.knobs import release_knobs
    faults = TableFaults(_table(release_knobs(ref.on_event, release=release)))
    assert faults.found[rule]
    assert all(not found for r, found in faults.found.items() if r != rule), faults.found


def test_a_table_that_forgets_admission_leaks_on_cancel():
    def forgetful(state, event, in_flight):
        if state == "waiting" and event == "admit":
            return ref.Transition("waiting")
        return ref.on_event(state, event, in_flight)
    found = TableFaults(_table(forgetful)).found["reclaim"]
    assert any("admit -> 'waiting'" in line and "leak" in line for line in found), found


def test_notifying_twice_and_a_live_terminal_state_are_caught():
    def chatty(state, event, in_flight):
        if state == "cancelling" and event == "step_completed" and not in_flight:
            return ref.Transition("done", ("release_pages", "notify_client"))
        if state == "done" and event == "cancel":
            return ref.Transition("done", ("notify_client",))
        return ref.on_event(state, event, in_flight)
    found = TableFaults(_table(chatty)).found
    assert any("notifies the client again" in line for line in found["stop"])
    # Shown on the worker's own path too: cancelled under a step, then its completion.
    assert any(line.startswith("from 'waiting': ") and line.endswith(
        "on_event('cancelling', 'step_completed', False) -> 'done' + release_pages, notify_client: "
        "notifies the client again") for line in found["stop"]), found["stop"]
    assert found["terminal"]


def _with(entries: dict):
    """The reference's table with some entries replaced: {(state, event, in_flight): Transition}."""
    table = _table(ref.on_event)
    table.update({k: ref.Transition(*v) for k, v in entries.items()})
    return table


@pytest.mark.parametrize("in_flight", [False, True])
@pytest.mark.parametrize("event", ["cancel", "step_launched", "finished"])
def test_an_ended_request_is_not_revived_or_notified_again_with_or_without_a_step_in_flight(event, in_flight):
    """'cancelling' is an ended request, a step in flight or not: served again, or its client
    told again, on any event, is a stop fault, and the entries' own check says so with either
    flag (the event paths find only some of these, in other words)."""
    revived = TableFaults(_with({("cancelling", event, in_flight): ("running",)})).found["stop"]
    assert any("puts a request that has ended back in 'running'" in line for line in revived), revived
    told = TableFaults(_with({("cancelling", event, in_flight): ("cancelling", ("notify_client",))})).found["stop"]
    assert any("notifies the client again after the request ended" in line for line in told), told


def test_reclaim_feedback_tells_lazy_from_leaked_and_finished_from_cancelled():
    stop_notify = ("stop_scheduling", "notify_client")
    # Cancelled with nothing in flight, it waits for a step completion to release: lazy.
    lazy = TableFaults(_with({("running", "cancel", False): ("cancelling", stop_notify)})).found["reclaim"]
    assert any("the pages come back only a step completion after the fence" in l for l in lazy), lazy
    # ... and the completion never releases either: a leak of a cancelled request.
    leak = TableFaults(_with({("running", "cancel", False): ("cancelling", stop_notify),
                              ("cancelling", "step_completed", False): ("done",)})).found["reclaim"]
    assert any("the cancelled request's pages are never released (a leak)" in l for l in leak), leak
    assert not any("come back only" in l for l in leak)
    # A finished request done without its release: the finished one leaks.
    done = TableFaults(_with({("running", "finished", False): ("done", ("stop_scheduling",))})).found["reclaim"]
    assert any("the finished request's pages are never released (a leak)" in l for l in done), done


@pytest.mark.parametrize("parked", ["waiting", "admitted"])
def test_only_cancelling_hears_completions_past_the_fence(parked):
    # A cancel that parks the request in a served state, whose completion entry releases:
    # the worker fires no completion to a cancelled request outside "cancelling", so that
    # release never comes. The pages leak; they do not come back late.
    found = TableFaults(_with({("running", "cancel", False): (parked, ("stop_scheduling", "notify_client")),
                               (parked, "step_completed", False): (parked, ("release_pages",))})).found
    assert any("the cancelled request's pages are never released (a leak)" in l for l in found["reclaim"]), found
    assert not any("come back only" in l for l in found["reclaim"])


def test_a_cancelled_request_parked_outside_cancelling_hears_no_completion():
    # Released at its cancel and parked in admitted: a mistake of the cancel entry (left in
    # a state the scheduler serves), and only that. The worker fires no completion to it,
    # so its completion entry's release is no second release, nor a return to service.
    faults = TableFaults(_with({
        ("running", "cancel", False): ("admitted", ("stop_scheduling", "notify_client", "release_pages")),
        ("admitted", "step_completed", False): ("admitted", ("release_pages",))})).found
    assert not faults["once"], faults["once"]
    assert faults["stop"] and all("leaves a cancelled request in 'admitted'" in line for line in faults["stop"]), \
        faults["stop"]


def test_each_state_a_request_can_be_cancelled_in_is_walked_even_if_the_table_never_leads_there():
    # Admitted straight into running, the table's own paths never hold a request in
    # admitted; its cancel entry there leaks all the same, and is found.
    leak = TableFaults(_with({("waiting", "admit", False): ("running",),
                              ("admitted", "cancel", False): ("done", ("stop_scheduling", "notify_client"))}))
    assert any(line.startswith("on_event('admitted', 'cancel', False) -> 'done'") and "leak" in line
               for line in leak.found["reclaim"]), leak.found


def test_a_done_reached_only_from_a_state_the_table_never_leads_to_shows_nothing():
    # Admitted straight into running, and every end from running parked in waiting: only a
    # cancel of a request in admitted (which this table never holds one in) is done. That
    # is not the worker's own path: "done stays done" is not shown.
    table = {k: ref.Transition("waiting" if t.next_state == "done" and k[0] == "running" else t.next_state,
                               t.actions)
             for k, t in _table(ref.on_event).items()}
    table["waiting", "admit", False] = ref.Transition("running")
    table["running", "cancel", True] = ref.Transition("waiting", ("stop_scheduling", "notify_client"))
    terminal = _measured(table)["terminal"]
    assert terminal.value == 0.0 and "no event path of your table ends a request into done" in terminal.feedback, \
        terminal.feedback


def test_one_entry_that_releases_twice_breaks_release_once():
    once = TableFaults(_with({("running", "finished", False): ("done", ("stop_scheduling", "release_pages",
                                                                          "release_pages"))})).found["once"]
    assert any("releases the pages a second time" in line for line in once), once


def test_a_stop_said_again_at_the_fence_is_harmless():
    # A cancelled request is already stopped: the completion that releases it may say so
    # again, and no live-request rule applies to it.
    table = _with({("cancelling", "step_completed", False): ("done", ("stop_scheduling", "release_pages"))})
    assert {rule: m.value for rule, m in _measured(table).items()} == dict.fromkeys(TableFaults.RULES, 1.0)


def test_an_end_under_a_pinning_step_straight_into_done_leaks_with_no_event_to_come():
    cancel = TableFaults(_with({("running", "cancel", True): ("done", ("stop_scheduling", "notify_client"))}))
    assert any("no event comes after this, so the cancelled request's pages are never released" in l
               for l in cancel.found["reclaim"]), cancel.found
    finish = TableFaults(_with({("running", "finished", True): ("done", ("stop_scheduling",))}))
    assert any("no event comes after this, so the finished request's pages are never released" in l
               for l in finish.found["reclaim"]), finish.found


@pytest.mark.parametrize("actions,says", [
    (("stop_scheduling",), "does not notify the client at once"),
    (("stop_scheduling", "notify_client", "notify_client"), "notifies the client 2 times"),
])
def test_a_cancel_must_notify_exactly_once(actions, says):
    found = TableFaults(_with({("admitted", "cancel", False): ("done", actions + ("release_pages",))})).found
    assert any(says in l for l in found["stop"]), found["stop"]


def test_a_lost_admission_and_a_lost_holder_are_told_apart():
    waiting = TableFaults(_with({("waiting", "admit", False): ("waiting",)})).found["reclaim"]
    assert any("forgets the admission: a waiting request holds no pages" in l for l in waiting), waiting
    holder = TableFaults(_with({("admitted", "step_launched", True): ("waiting",)})).found["reclaim"]
    assert any("moves a request that still holds its pages to 'waiting'" in l for l in holder), holder
    assert not any("forgets the admission" in l for l in holder)


# The model walks the entries the worker fires, with the worker's in-flight flag: admit and
# a cancel between steps come with False, a launch with True. An entry with the other flag
# is none of the paths' business (unless a rule judges it directly).
_LEAK_IF_FINISHED_ADMITTED = {("admitted", "finished", False): ("done", ("stop_scheduling",))}


@pytest.mark.parametrize("entries,rule,found", [
    # Asked by the worker: a fault there is found on the path.
    ({("waiting", "admit", False): ("admitted", ("release_pages",))}, "pinned", True),
    ({("running", "finished", False): ("done", ("stop_scheduling",))}, "reclaim", True),
    ({("running", "cancel", False): ("done", ("stop_scheduling", "notify_client"))}, "reclaim", True),
    # Never asked with this flag: the same entry there costs nothing.
    ({("waiting", "admit", True): ("admitted", ("release_pages",))}, "pinned", False),
    ({("admitted", "step_launched", False): ("running", ("release_pages",))}, "pinned", False),
    ({("running", "step_launched", False): ("running", ("release_pages",))}, "pinned", False),
    # A completion never comes with a step in flight: this one would lead a running request
    # back to admitted, where finishing leaks, on no path the worker makes.
    ({("running", "step_completed", True): ("admitted", ()), **_LEAK_IF_FINISHED_ADMITTED}, "reclaim", False),
])
def test_the_model_walks_each_entry_with_the_flag_the_worker_fires_it_with(entries, rule, found):
    faults = TableFaults(_with(entries)).found
    if found:
        assert faults[rule], faults
    else:
        assert all(not f for f in faults.values()), faults


def _measured(table, problem=""):
    ctx = CheckContext(None, [], memo={"table": ((table,), problem)})
    return {rule: transition_table._table_measure(ctx, rule) for rule in TableFaults.RULES}


def test_an_unusable_or_idle_table_earns_nothing_on_the_rules_it_cannot_show():
    # One invalid entry: no rule is judged, each says why.
    for m in _measured({}, "on_event('done', 'admit', False): next_state 'gone' is not one of ...").values():
        assert (m.value, m.feedback) == (0.0, "on_event('done', 'admit', False): next_state 'gone' is not one of ...")
    # A table that never releases keeps "never while pinned" and "once" only by doing nothing.
    idle = _measured({k: ref.Transition(t.next_state, tuple(a for a in t.actions if a != "release_pages"))
                      for k, t in _table(ref.on_event).items()})
    for rule in ("pinned", "once"):
        assert idle[rule].value == 0.0 and "releases a request's pages on no event path" in idle[rule].feedback
    assert idle["reclaim"].value == 0.0 and "release an ended request's pages" in idle["reclaim"].feedback
    # Stopping, notifying and done staying done need no release: the idle table keeps them.
    assert (idle["stop"].value, idle["terminal"].value) == (1.0, 1.0), (idle["stop"], idle["terminal"])
    assert {rule: m.value for rule, m in _measured(_table(ref.on_event)).items()} == dict.fromkeys(TableFaults.RULES, 1.0)


@pytest.mark.parametrize("parked", ["waiting", "running", "admitted"])
def test_a_table_whose_ended_requests_never_reach_done_earns_nothing_on_done_stays_done(parked):
    # Every end the reference sends to done goes to a live state instead, whichever state
    # the ended request is parked in. Only a request cancelled while waiting is done, and
    # that one never held pages nor was served: "done stays done" is kept only by never
    # getting there.
    never_done = {k: ref.Transition(parked if t.next_state == "done" and k[0] not in ("done", "waiting")
                                    else t.next_state, t.actions)
                  for k, t in _table(ref.on_event).items()}
    terminal = _measured(never_done)["terminal"]
    assert terminal.value == 0.0 and "no event path of your table ends a request into done" in terminal.feedback, \
        terminal.feedback
    # The pages are still released at the end: the rules that need no done keep it.
    kept = _measured(never_done)
    assert all(kept[rule].value == 1.0 for rule in ("pinned", "reclaim", "once")), kept


def test_done_stays_done_is_judged_for_a_table_that_ends_requests_from_running_alone():
    # Admitted straight into running, and a cancel under a pinning step straight into done:
    # every request the worker ends reaches done from running (never from admitted or
    # cancelling), and that is a request ended into done all the same.
    table = _with({("waiting", "admit", False): ("running",),
                   ("running", "cancel", True): ("done", ("stop_scheduling", "notify_client"))})
    terminal = _measured(table)["terminal"]
    assert terminal.value == 1.0, terminal.feedback


def test_done_stays_done_is_judged_for_a_table_that_ends_requests_through_cancelling_alone():
    # Cancelled or finished, a request goes to cancelling and is done at the completion
    # after (lazily, but done): no request reaches done from running or at the end event
    # itself, and it is ended into done all the same.
    table = _with({("admitted", "cancel", False): ("cancelling", ("stop_scheduling", "notify_client")),
                   ("running", "cancel", False): ("cancelling", ("stop_scheduling", "notify_client")),
                   ("running", "finished", False): ("cancelling", ("stop_scheduling",))})
    terminal = _measured(table)["terminal"]
    assert terminal.value == 1.0, terminal.feedback


def test_a_request_done_before_it_ends_does_not_show_that_done_stays_done():
    # Done at a step completion, while still served; the ends themselves park the request in
    # waiting. Done is reached, but never by ending: "done stays done" is not shown.
    table = {k: ref.Transition("waiting" if t.next_state == "done" and k[0] != "done" else t.next_state,
                               t.actions)
             for k, t in _table(ref.on_event).items()}
    table["running", "step_completed", False] = ref.Transition("done")
    terminal = _measured(table)["terminal"]
    assert terminal.value == 0.0 and "a request is done before it ends" in terminal.feedback, terminal.feedback


def test_a_table_that_releases_only_at_admission_is_told_it_releases_before_the_end():
    # Its one release comes before the request ends: the model finds no leak at the fence
    # (the pages are already back), and the reclaim criterion says why it is not kept.
    table = {k: ref.Transition(t.next_state, tuple(a for a in t.actions if a != "release_pages"))
             for k, t in _table(ref.on_event).items()}
    table["waiting", "admit", False] = ref.Transition("admitted", ("release_pages",))
    reclaim = _measured(table)["reclaim"]
    assert reclaim.value == 0.0, reclaim.feedback
    assert reclaim.feedback.startswith("on no event path does your table release an ended request's pages"), \
        reclaim.feedback
    # It releases, and once: the rule of releasing once is shown and kept.
    once = _measured(table)["once"]
    assert once.value == 1.0, once.feedback


def test_a_live_entry_that_stops_is_shown_on_the_event_path_that_reaches_it():
    stop = TableFaults(_with({("admitted", "step_launched", True): ("running", ("stop_scheduling",))})).found["stop"]
    first = next(iter(stop))
    assert first.startswith("from 'waiting': admit -> 'admitted'; then on_event('admitted', 'step_launched', True)"), stop
    assert "stops scheduling a request that was neither cancelled nor finished" in first
    # Three steps in: the path is told from its first state.
    later = TableFaults(_with({("running", "step_completed", False): ("running", ("stop_scheduling",))})).found["stop"]
    assert next(iter(later)).startswith(
        "from 'waiting': admit -> 'admitted', step_launched -> 'running'; then on_event('running', 'step_completed', "
        "False)"), later


@pytest.mark.parametrize("state", [s for s in STATES if s != "done"])
def test_a_done_request_leaving_done_quietly_breaks_done_stays_done(state):
    terminal = _measured(_with({("done", "step_completed", False): (state,)}))["terminal"]
    assert terminal.value == 0.0, terminal.feedback
    assert terminal.feedback == (f"on_event('done', 'step_completed', False) -> {state!r}: "
                                 "a done request must stay done with no action"), terminal.feedback


def test_a_single_finding_is_quoted_alone_and_more_are_counted():
    one = _measured(_with({("done", "cancel", False): ("done", ("notify_client",))}))["terminal"]
    assert one.feedback == ("on_event('done', 'cancel', False) -> 'done' + notify_client: "
                            "a done request must stay done with no action"), one.feedback
    two = _measured(_with({("done", "cancel", False): ("done", ("notify_client",)),
                           ("done", "admit", False): ("waiting",)}))["terminal"]
    assert two.feedback.endswith(" (2 ways in all)"), two.feedback
    # Every entry notifying: each finding counted, the first 20 kept as evidence.
    chatty = {k: ref.Transition(t.next_state, t.actions + ("notify_client",)) for k, t in _table(ref.on_event).items()}
    found = list(TableFaults(chatty).found["stop"])
    stop = _measured(chatty)["stop"]
    assert len(found) > 20 and stop.feedback == f"{found[0]} ({len(found)} ways in all)", stop.feedback
    assert stop.evidence == tuple(found[:20])


_SECOND_READING = """
_asked = set()


def on_event(state, event, step_in_flight):
    # Right the first time an entry is asked; after that, {after}.
    first = (state, event, step_in_flight) not in _asked
    _asked.add((state, event, step_in_flight))
    right = _right(state, event, step_in_flight)
    if first:
        return right
    {body}
"""


def _read_again(tmp_path, after: str, body: str) -> dict:
    text = REFERENCE.read_text().replace("def on_event(", "def _right(", 1)
    path = tmp_path / "reading.py"
    path.write_text(text + _SECOND_READING.format(after=after, body=body))
    return {c.id: c for c in grade("lesson4", path, "check").criteria}


def test_a_table_read_again_in_another_order_is_judged_on_each_reading(tmp_path):
    """Right the first time each entry is asked and releasing at the cancel after: read
    once, the table looked right and kept table-no-release-while-pinned (only the run,
    which reads it again, showed the release). Each reading is judged, and the feedback
    says the two differ."""
    c = _read_again(tmp_path, "it releases at the cancel, under the step",
                    "if event == 'cancel' and state == 'running':\n"
                    "        return Transition('done', ('stop_scheduling', 'notify_client', 'release_pages'))\n"
                    "    return right")
    pinned = c["table-no-release-while-pinned"]
    assert pinned.score == 0, pinned.feedback
    assert "on_event('running', 'cancel', True)" in pinned.feedback and "still pins" in pinned.feedback
    assert "your table changed between two readings" in pinned.feedback, pinned.feedback
    assert "three arguments alone" in pinned.feedback, pinned.feedback
    # The first entry the readings differ in, as each reading gave it.
    assert ("your table changed between two readings: on_event('running', 'cancel', True) -> 'cancelling' + "
            "stop_scheduling, notify_client the first time, -> 'done' + stop_scheduling, notify_client, "
            "release_pages the second") in pinned.feedback, pinned.feedback
    assert all(c[i].score == c[i].max_score for i in TABLE - {"table-no-release-while-pinned"}), c


def test_the_runs_follow_the_table_that_was_graded(tmp_path):
    """Right on the grader's two readings (100 calls) and releasing at the cancel after: the
    runs read the table again and followed another table than the one graded (22 of 24,
    and 24 of 24 for one wrong where no run shows it). The runs now follow the first graded
    reading, so what they show is of the table the table criteria judged: no call reaches
    on_event after its two readings."""
    text = REFERENCE.read_text().replace("def on_event(", "def _right(", 1)
    path = tmp_path / "counted.py"
    path.write_text(text + """
_CALLS = [0]


def on_event(state, event, step_in_flight):
    _CALLS[0] += 1
    if _CALLS[0] > 100 and event == "cancel" and state == "running":
        raise RuntimeError("asked past the grader's two readings")
    return _right(state, event, step_in_flight)
""")
    report = grade("lesson4", path, "check")
    lost = _lost(report)
    assert not lost, {c.id: c.feedback for c in report.criteria if c.id in lost}


def test_a_table_that_answers_by_the_entry_asked_before_is_judged_on_the_reverse_reading(tmp_path):
    """Asked in the same order twice, a table whose answer depends on the entry asked just
    before gives the same table twice; asked in reverse order, it shows."""
    text = REFERENCE.read_text().replace("def on_event(", "def _right(", 1)
    path = tmp_path / "previous.py"
    path.write_text(text + """
_previous = [None]


def on_event(state, event, step_in_flight):
    # Releases at a cancel under a step only right after the entry the reverse order asks first.
    before, _previous[0] = _previous[0], (state, event, step_in_flight)
    if (state, event, step_in_flight) == ("running", "cancel", True) and before == ("cancelling", "admit", False):
        return Transition("cancelling", ("stop_scheduling", "notify_client", "release_pages"))
    return _right(state, event, step_in_flight)
""")
    c = {c.id: c for c in grade("lesson4", path, "check").criteria}
    pinned = c["table-no-release-while-pinned"]
    assert pinned.score == 0 and "your table changed between two readings" in pinned.feedback, pinned.feedback


def test_readings_that_differ_only_in_the_order_of_the_actions_lose_nothing(tmp_path):
    c = _read_again(tmp_path, "the same actions in another order",
                    "return Transition(right.next_state, tuple(reversed(right.actions)))")
    assert all(c[i].score == c[i].max_score for i in TABLE), {i: c[i].feedback for i in TABLE}


# ---- probes, in process --------------------------------------------------------------------
def test_the_reference_key_tells_apart_blocks_whose_ids_pack_alike_at_two_widths():
    """Its ids are 4 bytes each while they fit, 8 past 2**32 - 1: (0, 1) and (2**32,) are the
    same 8 bytes packed so, and the width byte before them keeps their keys apart (and apart
    from a scope or parent that would end where the block begins)."""
    wide, narrow = (1 << 32,), (0, 1)
    assert ref.prefix_key("s", "", wide) != ref.prefix_key("s", "", narrow)
    assert ref.prefix_key("s", "", (-1,)) != ref.prefix_key("s", "", ((1 << 32) - 1,))
    assert ref.prefix_key("s", "", (1 << 40, 5)) == ref.prefix_key("s", "", (1 << 40, 5))
    keys = {ref.prefix_key(scope, parent, block) for scope, parent, block in
            [("ab", "", (1,)), ("a", "b", (1,)), ("a", "", (1,)), ("", "a", (1,)), ("", "", (1,)),
             ("", "", ()), ("", "", (0,)), ("", "", (0, 0))]}
    assert len(keys) == 8 and all(len(k) == 32 for k in keys)


@pytest.mark.parametrize("scope, parent, block", [
    ("default", "", tuple(range(16))), ("t\udc80é", "k" * 32, (7, 0, (1 << 32) - 1)),
    ("", "", ()), ("s", "p", (1 << 32, 3)), ("s", "p", (-1,)), ("s", "p", (5,) * 17)])
def test_the_reference_key_is_blake2b_of_its_documented_fields(scope, parent, block):
    """The reference's keys are a published answer (and the course's runs and incidents are
    made of them): the bytes it hashes are the layout its comment states, built here field
    by field, for every width and block length, whatever packs them."""
    def field(text):
        raw = text.encode("utf-8", "surrogatepass")
        return len(raw).to_bytes(4, "little") + raw
    narrow = all(0 <= t < 1 << 32 for t in block)
    ids = b"".join(t.to_bytes(4 if narrow else 8, "little", signed=not narrow) for t in block)
    expected = hashlib.blake2b(field(scope) + field(parent) + (b"\x04" if narrow else b"\x08") + ids,
                               digest_size=16).hexdigest()
    assert ref.prefix_key(scope, parent, block) == expected
    assert ref.prefix_key(scope, parent, block) == expected      # a packer kept, asked again


def test_hidden_probes_catch_joined_keys_and_spare_the_reference(secret, tmp_path):
    pairs = [c.inputs for c in lesson4.hidden_probes(secret) if c.family == "key"]
    assert {p.kind for p in pairs} == {"scope", "parent", "block"}
    assert all(ref.prefix_key(*p.a) != ref.prefix_key(*p.b) for p in pairs)
    for name, kind in [("key_separator", "scope"), ("key_token_join", "block"),
                       ("key_without_parent", "parent"), ("key_normalized", "scope")]:
        key = _module(name, tmp_path).prefix_key
        assert any(key(*p.a) == key(*p.b) for p in pairs if p.kind == kind), (name, secret)


def test_publish_probes_agree_with_the_reference(secret):
    course = find_course(str(ROOT))
    cases = [c for c in lesson4.public_cases(course) + lesson4.hidden_probes(secret)
             if c.family == "publish"]
    assert len(cases) > 40
    for c in cases:
        want = {p.index for p in c.inputs if may_publish(p)}
        assert set(ref.publishable(c.inputs)) == want, c.label


def test_hidden_cases_are_drawn_from_the_secret(secret):
    course = find_course(str(ROOT))
    digests = lambda s: [c.digest for c in lesson4.hidden_cases(s, course)]
    assert digests(secret) == digests(secret)
    assert digests(secret) != digests(other_than(secret))


# ---- what the runs show, for the reference and its faulty knobs ---------------------------------
def test_reference_reclaims_exactly_at_the_fence_and_at_cancel_does_not(secret):
    case = hidden_scenarios(find_course(str(ROOT)), "lesson4", secret)[0]
    s = case.inputs
    good = s.run(lesson_policy(reference_decisions("lesson4"), s.sheet))
    cancelled = [r for r in good.requests if r.cancel_s is not None and r.released_s is not None]
    assert cancelled and all(r.released_s == r.fence_s for r in cancelled)
    assert any(r.fence_s > r.cancel_s for r in cancelled)      # some waited for a step
    early = s.run(lesson_policy(reference_decisions("lesson4"), {**s.sheet, "cancellation": {"release": "at_cancel"}}))
    assert early_releases(early) and good.counts()["use_after_free"] == 0


def test_release_findings_name_each_kind_of_wrong_release():
    """Each branch of early_releases and late_releases, on records made for it (a worker
    run gives them all only with several wrong tables at once)."""
    from dataclasses import replace
    from grader.lessons.cancellation_runs import late_releases
    from reference.shapes import RequestRecord, Slo
    base = RequestRecord(id="r", scope="s", cls="c", slo=Slo(1.0, 1.0), arrival_s=0.0,
                         outcome="completed", prompt_tokens=16, max_new_tokens=4, tokens_out=4,
                         released_s=2.0)
    records = (
        base,                                                                  # finished, released
        replace(base, id="early", outcome="cancelled", cancel_s=1.0, fence_s=1.5, released_s=1.0),
        replace(base, id="served", outcome="failed", released_s=0.7,
                reason="its pages were released while it was running"),
        replace(base, id="lazy", outcome="cancelled", cancel_s=1.0, fence_s=1.5, released_s=1.75),
        replace(base, id="fence", outcome="cancelled", cancel_s=1.0, fence_s=1.5, released_s=1.5),
        replace(base, id="never", outcome="cancelled", cancel_s=1.0, fence_s=1.5, released_s=None),
    )
    s = hidden_scenarios(find_course(str(ROOT)), "lesson4", b"unit")[0].inputs
    run = replace(s.run(lesson_policy(reference_decisions("lesson4"), s.sheet)), requests=records)
    assert early_releases(run) == [
        ("releases before the fence", "early was cancelled at 1.000 s during a step that ends 1.500 s; "
                                      "its pages were released at 1.000 s, before that step completed"),
        ("releases while served", "served's pages were released at 0.700 s while it was still being "
                                  "served (neither cancelled nor finished)")]
    assert late_releases(run) == [
        ("lazy releases", "lazy was cancelled at 1.000 s; its fence was 1.500 s, but its pages came "
                          "back at 1.750 s (lazy reclamation)")]


# ---- the README's timelines are runs of the reference worker ------------------------------------
def _timeline(sheet: dict, requests: list):
    from grader.course.scenario import course_machines
    from reference.specs import model_from, worker_from
    from reference.worker import simulate
    models, workers = course_machines(find_course(str(ROOT)))
    model = model_from(models["gqa-8b-bf16"], "gqa-8b-bf16")
    worker = worker_from(workers["l24"], "l24")
    return simulate(model, worker, reference_policy(sheet), requests)


def _request(i, scope, arrival, prompt, out, cancel=None):
    import numpy as np
    from reference.request import Request
    from reference.shapes import Slo
    return Request(i, f"r{i}", scope, "x", arrival, np.asarray(prompt, np.int32), out, out,
                   Slo(10.0, 1.0), cancel)


def _tokens(seed, n):
    import numpy as np
    return np.random.default_rng(seed).integers(0, 32000, n)


def test_readme_timelines_are_computed():
    import numpy as np
    readme = (ROOT / "assignments" / "lesson4" / "README.md").read_text()
    said = lambda text: text in " ".join(readme.split())
    chunk64 = {"chunk_rule": {"rule": "fixed", "fixed_tokens": 64}}
    # Timeline 1: a cancel during a step, released at the fence, then at the cancel.
    t1 = [_request(0, "acme", 0.0, _tokens(1, 48), 40, cancel=0.0200),
          _request(1, "acme", 0.0210, _tokens(2, 40), 8)]
    r0 = _timeline(chunk64, t1).requests[0]
    assert said(f"`r0` cancelled at {r0.cancel_s:.4f}, fence {r0.fence_s:.4f}, released {r0.released_s:.4f}")
    early = _timeline({**chunk64, "cancellation": {"release": "at_cancel"}}, t1)
    assert [v.kind for v in early.violations] == ["use_after_free"]
    assert said(early.violations[0].detail)
    # Timeline 2: shared pages; without the scope, globex hits acme's pages.
    system = _tokens(1, 48)
    t2 = [_request(0, "acme", 0.0, np.concatenate([system, _tokens(3, 20)]), 12, cancel=0.0150),
          _request(1, "acme", 0.0080, np.concatenate([system, _tokens(4, 30)]), 12),
          _request(2, "globex", 0.0090, np.concatenate([system, _tokens(5, 16)]), 4)]
    safe = _timeline(chunk64, t2)
    assert not safe.violations and f"{safe.requests[0].fence_s:.4f}" == "0.0160"
    leaky = _timeline({**chunk64, "cancellation": {"with_scope": False}}, t2)
    assert {v.kind for v in leaky.violations} == {"cross_scope_hit"} and said(leaky.violations[0].detail)
    # Timeline 3: cancelled mid-prefill; a rule that ignores the write is refused twice.
    t3 = [_request(0, "acme", 0.0, _tokens(1, 100), 8, cancel=0.0090)]
    chunk40 = {"chunk_rule": {"rule": "fixed", "fixed_tokens": 40}}
    good = _timeline(chunk40, t3)
    assert not good.violations and f"{good.requests[0].released_s:.4f}" == "0.0112"
    careless = _timeline({**chunk40, "cancellation": {"require_written": False}}, t3)
    assert [v.kind for v in careless.violations] == ["poisoned_publish"] * 2
    assert all(said(v.detail) for v in careless.violations)


# ---- prefix keys: what no key shows, the key's length, and which rule a collision breaks ------
def _key_report(tmp_path, body: str, name: str = "key.py"):
    p = tmp_path / name
    p.write_text("import hashlib\n\n\ndef prefix_key(scope, parent_key, block_tokens):\n    " + body + "\n")
    return {c.id: c for c in grade("lesson4", p, "check").criteria}


def test_a_stub_or_a_constant_key_earns_nothing_on_the_key_criteria(tmp_path):
    stub = _key_report(tmp_path, "raise NotImplementedError", "stub.py")
    for cid in ("key-scope-separation", "key-position", "key-deterministic"):
        assert stub[cid].score == 0 and "not implemented" in stub[cid].feedback, (cid, stub[cid].feedback)
    constant = _key_report(tmp_path, "return 'k'", "constant.py")
    assert constant["key-deterministic"].score == 0
    assert constant["key-deterministic"].feedback.startswith("prefix_key gave the same answer"), \
        constant["key-deterministic"].feedback


@pytest.mark.parametrize("length,ok", [(512, True), (513, False)])
def test_a_key_of_the_workers_longest_length_is_usable_and_one_more_is_not(tmp_path, length, ok):
    body = (f"return (hashlib.sha256(repr((scope, parent_key, tuple(block_tokens))).encode()).hexdigest()"
            f" * 9)[:{length}]")
    c = _key_report(tmp_path, body, f"long{length}.py")
    for cid in ("key-scope-separation", "key-position"):
        if ok:
            assert c[cid].score == c[cid].max_score, (cid, c[cid].feedback)
        else:
            assert c[cid].score == 0
            assert f"returned a key of {length} characters; the worker takes at most 512" in c[cid].feedback


@pytest.mark.parametrize("body,words", [
    # the parent left out: one key for two positions
    ("return hashlib.sha256(repr((scope, tuple(block_tokens))).encode()).hexdigest()",
     "one key for two positions: the parent key must be in the key, kept apart from the scope and the tokens"),
    # the tokens left out: one key for two blocks
    ("return hashlib.sha256(repr((scope, parent_key)).encode()).hexdigest()",
     "one key for two different blocks of tokens"),
])
def test_key_position_names_the_rule_the_collision_breaks(tmp_path, body, words):
    """Both the public pair and the grader's own search (which names the rule by how its two
    inputs differ) say which rule the key breaks."""
    c = _key_report(tmp_path, body)["key-position"]
    pairs, search = c.feedback.split("; and the grader's search", 1)
    assert c.score < c.max_score and pairs.endswith(words) and search.endswith(words), c.feedback


@pytest.mark.parametrize("key", [ref.prefix_key,                                     # no glue to read
                                 lambda s, p, b: f"{s}|{p}|" + ",".join(map(str, b))])  # glue everywhere
def test_the_key_search_asks_at_most_the_1500_inputs_the_readme_promises_all_different(key):
    """README and grading-gaps.md: up to 1,500 inputs, each asked once. The families built
    on the scouts' keys, then a sample to fill the budget (repeats dropped)."""
    from grader.lessons import key_search
    asked = key_search.inputs([key(*t) for t in key_search.SCOUTS])
    assert 1400 <= len(asked) <= 1500 and len(set(asked)) == len(asked)


def test_hidden_key_probes_hold_scopes_one_character_apart_and_past_512(many_secrets):
    """Under every secret (the fixture's and forty more): pairs of scopes of one length that
    differ in one character (what a transcoding or a sanitiser merges; eight are drawn, one
    dropped now and then when the character drawn is the one it replaces), a pair of scopes
    longer than the 512 characters a key may hold (what a key that cuts the scope merges),
    and scopes that hold a NUL (what a C string ends at). The NUL once never reached a
    hidden scope (numpy's string arrays drop a trailing one), and the long pair fell short of
    512 characters under 83d050f9347384f8."""
    for s in many_secrets:
        one_apart = long = nul = 0
        for case in lesson4.hidden_probes(s):
            if case.family != "key" or case.inputs.kind != "scope":
                continue
            a, b = case.inputs.a[0], case.inputs.b[0]
            if len(a) == len(b) and sum(x != y for x, y in zip(a, b)) == 1:
                one_apart += 1
                long += len(a) > 512
                nul += "\x00" in a     # drawn from the hidden names' alphabet, not a separator
        assert one_apart - long >= 5 and long >= 1 and nul >= 1, (s.hex(), one_apart, long, nul)


def _lossy_key(scope_of):
    """A sound length-prefixed digest of (scope, parent, block), the scope mapped first."""
    def key(scope, parent_key, block_tokens):
        h = hashlib.sha256()
        for part in (scope_of(scope), parent_key):
            data = part.encode("utf-8")
            h.update(len(data).to_bytes(8, "little") + data)
        h.update(",".join(map(str, block_tokens)).encode())
        return h.hexdigest()
    return key


@pytest.mark.parametrize("scope_of", [
    lambda s: re.sub(r"[^A-Za-z0-9-]", "_", s),                   # a sanitiser: "acme.corp", "acme_corp"
    lambda s: s.encode("ascii", "ignore").decode(),                # "café" and "caf"
    lambda s: s.encode("ascii", "replace").decode(),               # "café" and "caf?"
    lambda s: s[:256],                                             # a name cut short
    lambda s: s[:80],
    lambda s: s[:300],                                             # the longest cut it names
], ids=["sanitised", "ascii-ignore", "ascii-replace", "cut-256", "cut-80", "cut-300"])
def test_the_key_search_alone_finds_two_scopes_a_lossy_name_mapping_merges(scope_of):
    """Without any probe pair: the search's own inputs hold scopes that each mapping merges
    (the pairs named beside each mapping are two of them)."""
    from grader.lessons import key_search
    key = _lossy_key(scope_of)
    asked = key_search.inputs([key(*t) for t in key_search.SCOUTS])
    found = key_search.collisions((t, key(*t)) for t in asked)
    assert "scope" in found and set(found) == {"scope"}, found


def test_the_key_space_is_the_alphabet_to_the_longest_key_and_64_bits_pass():
    """8 hexadecimal characters take 16 + 16^2 + ... + 16^8 = 4,581,298,448 values, 32.09
    bits; 16 take 16^16 * 16/15 + ..., just over 64 bits, which is enough. Any character
    outside the small alphabets (a readable key holds its scope) is not judged."""
    from grader.lessons.key_search import key_space
    name, longest, bits = key_space(["0a1b2c3d", "ffff", "9"])
    assert (name, longest) == ("hexadecimal", 8) and 32.09 < bits < 32.10
    assert key_space(["0123456789abcdef"]) is None
    assert key_space(["0123456789ABCDEF"[:15]])[:2] == ("hexadecimal", 15)
    assert key_space(["QUJD+/=="]) [0] == "base64"
    assert key_space(["3:abc0:7,8", "\u00e9"]) is None and key_space([]) is None


def test_a_key_space_is_the_smallest_alphabet_that_holds_every_character():
    """Sixteen lowercase hexadecimal characters, all of them used, at most 15 long: 16 + 16^2
    + ... + 16^15 = 16^15 * 16/15 (less 16/15) values, 60.09 bits, too few. Read as the
    next alphabet up (22 characters) it would be 66.9 bits and pass. And the widest
    alphabet judged, printable ASCII, is judged."""
    from grader.lessons.key_search import key_space
    name, longest, bits = key_space(["0123456789abcde", "f"])
    assert (name, longest) == ("hexadecimal", 15) and 60.09 < bits < 60.10
    # Printable ASCII, 95 characters, at most 8 long: 95^8 * 95/94 (less 95/94), 52.57 bits.
    name, longest, bits = key_space(["k~!@#$%&", "(x)"])
    assert (name, longest) == ("printable ASCII", 8) and 52.57 < bits < 52.58


@pytest.mark.parametrize("digest_bytes,kept", [(7, False), (8, True)])
def test_a_hash_written_in_decimal_digits_is_judged_on_ten_digits(tmp_path, digest_bytes, kept):
    """A 56-bit hash written in decimal takes at most 10 + 10^2 + ... + 10^17 values, 56.6
    bits; read as 17 hexadecimal characters it was 68 bits and kept full marks. A 64-bit one
    (20 digits, 66.6 bits) keeps them."""
    from grader.lessons.key_search import key_space
    name, longest, bits = key_space(["12345678901234567", "9"])
    assert (name, longest) == ("decimal", 17) and 56.6 < bits < 56.7
    # 19 digits: 63.27 bits, the one key space judged between 63 and 64 bits.
    name, longest, bits = key_space(["1234567890123456789"])
    assert (name, longest) == ("decimal", 19) and 63.2 < bits < 63.3
    c = _key_report(tmp_path, "text = repr((scope, parent_key, tuple(block_tokens))).encode('utf-8', 'surrogatepass')\n"
                              f"    return str(int.from_bytes(hashlib.sha256(text).digest()[:{digest_bytes}], 'big'))")
    scope = c["key-scope-separation"]
    assert (scope.score == scope.max_score) == kept, scope.feedback
    if not kept:
        assert "characters of decimal" in scope.feedback, scope.feedback


def test_what_every_key_holds_alike_is_no_part_of_the_key_space():
    """A tag before a cut digest ("blk:" and 8 hexadecimal digits) is 2^32 keys; read as 12
    printable characters it was 2^78 and passed. Characters every key holds at one place (a
    head, a tail, a separator in keys of one length) take no values; fewer than SHARED_AFTER
    distinct keys cannot tell a shared character from one met by chance, and a digest whose
    every place varies keeps its 64 bits."""
    from grader.lessons.key_search import SHARED_AFTER, key_space, shared_characters
    rng = random.Random(7)
    digits = lambda n: "".join(rng.choice("0123456789abcdef") for _ in range(n))
    tagged = [f"blk:{digits(8)}" for _ in range(40)]
    assert shared_characters(tagged) == (4, 4)
    name, longest, bits = key_space(tagged)
    assert (name, longest) == ("hexadecimal", 8) and 32.09 < bits < 32.10
    # A separator between two 4-digit halves, and a tail, in keys of one length.
    split = [f"{digits(4)}-{digits(4)}=" for _ in range(40)]
    assert shared_characters(split) == (0, 2) and key_space(split)[:2] == ("hexadecimal", 8)
    # Keys of several lengths: the head and the tail alone.
    ragged = [f"v1:{digits(rng.randint(4, 8))}:z" for _ in range(40)]
    assert shared_characters(ragged) == (3, 5) and key_space(ragged)[:2] == ("hexadecimal", 8)
    # Too few keys to tell, and 16 digits that all vary: judged as before.
    assert shared_characters(tagged[:SHARED_AFTER - 1]) == (0, 0)
    assert key_space(tagged[:SHARED_AFTER - 1]) is None          # 12 printable characters: 78 bits
    assert shared_characters([digits(16) for _ in range(200)])[1] == 0
    assert key_space([digits(16) for _ in range(200)]) is None


def test_empty_keys_have_no_key_space_to_judge():
    """A prefix_key that returns "" everywhere has keys of no length: nothing to count (its
    pairs of probes already collide), and no logarithm of zero values to take."""
    from grader.lessons.key_search import key_space
    assert key_space(["", ""]) is None and key_space([""]) is None


def test_readable_glue_reads_every_scouts_key_that_is_text():
    """A scout answered with something other than text (a learner's key may be anything) is
    skipped, not the end of the reading: the keys after it still give their glue."""
    from grader.lessons.key_search import readable_glue
    scouts = [("aa", "pp", (7, 8)), ("bb", "qq", (5, 6))]
    assert readable_glue(scouts, [17, "bb|qq|5,6"]) == ["", "|", ","]
    assert readable_glue(scouts, ["aa/pp/7;8", None]) == ["", "/", ";"]


# ---- the scenario runs' criteria: what a failing or idle function shows ----------------------
def _reference_but(tmp_path, name: str, override: str):
    """The reference answer with one function replaced (a later def wins)."""
    p = tmp_path / f"{name}.py"
    p.write_text((ROOT / "reference" / "solutions" / "lesson4.py").read_text() + "\n\n" + override + "\n")
    return {c.id: c for c in grade("lesson4", p, "check").criteria}


def test_a_reference_key_meets_the_hit_rate_target_and_is_told_no_hint():
    c = {c.id: c for c in grade("lesson4", ROOT / "reference" / "solutions" / "lesson4.py", "check").criteria}
    hit = c["run-hit-rate"]
    assert hit.score == hit.max_score
    assert hit.feedback.endswith("(100%; at least 95% is the target)"), hit.feedback


@pytest.mark.parametrize("function,override,says", [
    ("prefix_key", "def prefix_key(scope, parent_key, block_tokens):\n    raise ValueError('nope')",
     "prefix_key calls gave no usable answer; first: prefix_key raised ValueError: nope"),
    ("prefix_key", "def prefix_key(scope, parent_key, block_tokens):\n    raise NotImplementedError",
     "prefix_key is not implemented yet"),
    ("on_event", "def on_event(state, event, step_in_flight):\n    raise ValueError('nope')",
     "on_event calls gave no usable answer; first: on_event raised ValueError: nope"),
])
def test_a_run_criterion_of_a_function_that_failed_earns_nothing_and_says_how(tmp_path, function, override, says):
    """A property cannot be credited on runs where the worker fell back for the function;
    the feedback tells a stub from a function that failed."""
    c = _reference_but(tmp_path, f"{function}_fails", override)
    criteria = ["run-hit-rate", "run-hits-in-scope"] if function == "prefix_key" else \
        ["run-no-use-after-free", "run-reclaim-at-fence", "run-release-once", "run-stop-after-cancel"]
    for cid in criteria:
        assert c[cid].score == 0 and says in c[cid].feedback, (cid, c[cid].feedback)
        assert ("gave no usable answer" in c[cid].feedback) == ("ValueError" in override)


def test_a_table_that_never_serves_a_request_shows_no_hit_rate(tmp_path):
    """on_event stops scheduling every request it admits: no request completes, so the hit
    rate of its runs shows nothing of the keys (a run where nothing happened is no evidence)."""
    c = _reference_but(tmp_path, "never_serves", "def on_event(state, event, step_in_flight):\n"
                                        "    if event == 'admit':\n"
                                        "        return Transition(state, ('stop_scheduling',))\n"
                                        "    return Transition(state)")
    hit = c["run-hit-rate"]
    assert hit.score == 0 and "no request completed in this run" in hit.feedback, hit.feedback


def test_no_hit_for_want_of_a_published_page_points_at_publishable(tmp_path):
    """A publishable that offers nothing leaves run-hits-in-scope with no hit to judge: the
    line says why, instead of leaving a right key's zero unexplained."""
    c = _reference_but(tmp_path, "publishes_nothing", "def publishable(pages):\n    return ()")
    hits = c["run-hits-in-scope"]
    assert hits.score == 0 and "your publishable offered the cache no page" in hits.feedback, hits.feedback
    c = _reference_but(tmp_path, "never_hits", "def prefix_key(scope, parent_key, block_tokens):\n"
                                              "    import uuid\n    return uuid.uuid4().hex")
    hits = c["run-hits-in-scope"]
    assert hits.score == 0 and "no prefix lookup hit" in hits.feedback, hits.feedback
    assert "publishable" not in hits.feedback, hits.feedback


def test_no_hit_for_want_of_a_usable_publishable_answer_says_what_was_unusable(tmp_path):
    """A publishable whose every answer is refused (a set) offers no page either: the key's
    zero says why, not only that nothing was offered (before, the line read as if the rule
    had chosen no page)."""
    c = _reference_but(tmp_path, "publishes_a_set",
                       "def publishable(pages):\n"
                       "    return {p.index for p in pages if p.prompt_tokens == p.page_tokens\n"
                       "            and p.written_tokens >= p.page_tokens and not p.published}")
    hits = c["run-hits-in-scope"]
    assert hits.score == 0 and "your publishable offered the cache no page" in hits.feedback, hits.feedback
    assert "publishable calls gave no usable answer" in hits.feedback and "returned a set" in hits.feedback, \
        hits.feedback


def test_a_learner_run_crosses_boundaries_frozen():
    import dataclasses
    from grader.lessons.cancellation_runs import LearnerRun
    with pytest.raises(dataclasses.FrozenInstanceError):
        LearnerRun(None, None, 0).published = 3


def test_a_key_pair_crosses_boundaries_frozen():
    import dataclasses
    from grader.lessons.prefix_keys import KeyPair
    pair = KeyPair("scope", ("a", "", (1,)), ("b", "", (1,)))
    with pytest.raises(dataclasses.FrozenInstanceError):
        pair.kind = "block"


def test_the_key_searchs_material_crosses_boundaries_frozen():
    import dataclasses
    from grader.lessons.key_search import Material
    m = Material(("s",), ("",), ((1,),), ("|",))
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.glue = ()


def test_a_collision_of_blocks_written_alike_names_the_token_they_differ_in(tmp_path):
    """A key that skips a block's token 10 collides on page-long blocks one token apart
    there; the two inputs are written alike up to their sixth token, so the line names the
    token (before, it showed two identical inputs)."""
    c = _key_report(tmp_path, "tokens = block_tokens[:10] + block_tokens[11:]\n"
                              "    text = repr((scope, parent_key, len(block_tokens), tokens))\n"
                              "    return hashlib.sha256(text.encode('utf-8', 'surrogatepass')).hexdigest()")
    line = c["key-position"].feedback
    assert c["key-position"].score == 0, line
    found = re.search(r"\(the blocks differ only in token (\d+): (\d+) against (\d+)\)", line)
    assert found, line
    i, x, y = map(int, found.groups())
    assert i == 10 and x != y, line
    assert c["key-scope-separation"].score == c["key-scope-separation"].max_score, c["key-scope-separation"].feedback


def test_difference_names_what_show_input_cuts():
    from grader.lessons.prefix_keys import difference, show_input
    parent = "9" * 50
    a, b = ("s", parent, (1,)), ("s", parent[:-1] + "0", (1,))
    assert show_input(a) == show_input(b)
    assert difference(a, b) == " (the parent keys differ only in character 49: '9' against '0')"
    block = tuple(range(10))
    assert difference(("s", "", block), ("s", "", block + (0,))) == " (the blocks are 10 and 11 tokens long)"
    assert difference(("s", "", (1,)), ("t", "", (1,))) == ""        # shown apart already
    assert difference(a, a) == ""                                     # one input: nothing to name


def test_kind_names_the_first_field_two_inputs_differ_in_whatever_their_order():
    from grader.lessons.key_search import kind
    for a, b in ((("s", "p0", (1,)), ("s", "p1", (1,))), (("s", "p1", (1,)), ("s", "p0", (1,)))):
        assert kind(a, b) == "parent"
    assert kind(("s", "p", (1,)), ("s", "p", (2,))) == "block"
    assert kind(("s", "p", (1,)), ("t", "q", (2,))) == kind(("t", "p", (1,)), ("s", "p", (1,))) == "scope"


def test_a_collision_the_probes_name_is_not_named_again_by_the_search(tmp_path):
    # A key joined by '|' read: "... prefix_key('a|b', 'c', (7, 8, 9)) vs prefix_key('a',
    # 'b|c', (7, 8, 9)) ...: both got '2dc2...'; and the grader's search against your
    # encoding found two inputs with one key: prefix_key('a|b', 'c', (7, 8, 9)) and ...".
    path = tmp_path / "piped.py"
    path.write_text("import hashlib\n\n\ndef prefix_key(scope, parent_key, block_tokens):\n"
                    "    text = '|'.join([scope, parent_key, ','.join(map(str, block_tokens))])\n"
                    "    return hashlib.sha256(text.encode()).hexdigest()\n")
    report = grade("lesson4", path, "check")
    said = next(c for c in report.criteria if c.id == "key-scope-separation")
    assert said.score == 0 and said.feedback.count("prefix_key('a|b', 'c', (7, 8, 9))") == 1, said.feedback
    assert "search against your encoding" not in said.feedback, said.feedback


# ---- prefix keys judged in process: askings, processes and the search, without a sandbox ------
def _digest(*parts) -> str:
    return hashlib.sha256(repr(parts).encode("utf-8", "surrogatepass")).hexdigest()


class _KeyProcesses:
    """prefix_key answered in this process, as a sandbox would: ``key(triple, process, n)``
    is the key of an input the n-th time (0, 1, ...) one process is asked it; restart()
    starts process 1, 2, ... with nothing met."""
    def __init__(self, key):
        self.key, self.process, self.met = key, 0, {}

    def call_many(self, function, args):
        from grader.engine.sandbox.session import CallResult
        answers = []
        for t in args:
            n = self.met.get(t, 0)
            self.met[t] = n + 1
            answers.append(CallResult("ok", self.key(t, self.process, n)))
        return answers

    def restart(self):
        self.process, self.met = self.process + 1, {}


def _key_context(pairs, key) -> CheckContext:
    """Public probe pairs (kind, a, b), each its own case, answered by ``key``."""
    from grader.engine.cases import Case
    from grader.lessons.prefix_keys import KeyPair, show_input
    cases = [Case("key", f"pair {i}", "public", KeyPair(kind, a, b), f"{show_input(a)} vs {show_input(b)}")
             for i, (kind, a, b) in enumerate(pairs)]
    return CheckContext(_KeyProcesses(key), cases)


def _askings(table: dict):
    """A key given by ``table`` (input -> its keys: first, again, in the second process)
    and a sound digest for every other input."""
    def key(t, process, n):
        if t in table:
            return table[t][2 if process else min(n, 1)]
        return _digest(*t)
    return key


def test_a_probes_key_joins_the_search_only_when_all_three_askings_agree():
    """The search runs in the second process; a probe's key joins it only when its first
    asking, its second and the second process's all gave it. One scout gets key k, and four
    probes' first asking gives k too: the one asked k three times collides with the scout,
    and no other (k then a greater key in this process, k twice then a greater one in the
    second process, k then a smaller key) may take its place as the first collision."""
    from grader.lessons import key_search, prefix_keys
    lo, k, hi = sorted(_digest(x) for x in "abc")
    scout = key_search.SCOUTS[1]
    t1, t2, t3, t4 = (("u1", "", (1,)), ("u2", "", (2,)), ("u3", "", (3,)), ("u4", "", (4,)))
    table = {scout: (k, k, k), t1: (k, k, k), t2: (k, hi, hi), t3: (k, k, hi), t4: (k, lo, lo)}
    ctx = _key_context([("scope", t2, t3), ("scope", t4, t1)], _askings(table))
    found = prefix_keys.searched(ctx)
    assert found.collisions == {"scope": (scout, t1, k)}, found.collisions
    assert found.small_space == "" and found.small_in_scope == ""


def test_a_pair_is_judged_on_the_first_asking_of_both_its_inputs():
    """Two positions that get one key in this process collide, whatever a second process
    gives them (that is key-deterministic's business); neither joins the search."""
    from grader.lessons.prefix_keys import key_position, show_input
    lo, k, hi = sorted(_digest(x) for x in "abc")
    a, b = ("s", "p0", (1,)), ("s", "p1", (1,))
    ctx = _key_context([("parent", a, b)], _askings({a: (k, k, lo), b: (k, k, hi)}))
    m = key_position(ctx, {})
    assert m.value == 0.0
    assert m.feedback == (f"1 of 1 pairs of parents or blocks wrong; first, {show_input(a)} vs {show_input(b)}: "
                          f"both got '{k[:40]}': one key for two positions: the parent key must be in the key, kept apart from the scope and the tokens")


def test_show_input_writes_an_input_whole_up_to_its_bounds_and_difference_says_only_or_first():
    """A text of 40 characters is written whole and one of 41 as its first 16 and its
    length; a block of 6 tokens whole and one of 7 as its first 6 and '...'; a block of
    one token as a tuple of one. Two inputs written alike that differ in one place are told
    where they differ "only", in several places where they "first" do."""
    from grader.lessons.prefix_keys import difference, show_input
    forty = "abcdefghijklmnopqrstuvwxyz0123456789ABCD"
    assert len(forty) == 40
    assert show_input((forty, "", (1,))) == "prefix_key('abcdefghijklmnopqrstuvwxyz0123456789ABCD', '', (1,))"
    assert show_input(("s", forty + "E", (1, 2))) == "prefix_key('s', 'abcdefghijklmnop...' (41 characters), (1, 2))"
    assert show_input(("s", "", (0, 1, 2, 3, 4, 5))) == "prefix_key('s', '', (0, 1, 2, 3, 4, 5))"
    assert show_input(("s", "", (0, 1, 2, 3, 4, 5, 6))) == "prefix_key('s', '', (0, 1, 2, 3, 4, 5, ...))"
    parent = "9" * 50
    twice = parent[:45] + "0" + parent[46:48] + "1" + parent[49:]
    assert difference(("s", parent, (1,)), ("s", twice, (1,))) == \
        " (the parent keys differ first in character 45: '9' against '0')"
    block = tuple(range(10))
    assert difference(("s", "", block), ("s", "", block[:8] + (99,) + block[9:])) == \
        " (the blocks differ only in token 8: 8 against 99)"


def test_a_collision_the_search_finds_quotes_the_first_40_characters_of_the_key():
    """A key that leaves out the parent: the probe pair (two blocks) is told apart, and the
    search's own inputs show the collision, its key cut at 40 characters as a pair's is."""
    from grader.lessons.prefix_keys import key_position
    ctx = _key_context([("block", ("s", "p", (1,)), ("s", "p", (2,)))], lambda t, process, n: _digest(t[0], t[2]))
    m = key_position(ctx, {})
    assert (m.value, m.evidence) == (0.0, ("search",)), m
    assert m.feedback.startswith("the grader's search against your encoding found two inputs with one key: "), m.feedback
    shown = re.search(r" both got '([0-9a-f]*)': one key for two positions: the parent key must be in the key, kept apart from the scope and the tokens$",
                      m.feedback)
    assert shown and len(shown.group(1)) == 40, m.feedback


def test_a_key_space_too_small_is_said_alone_or_after_the_pairs_a_key_merges():
    """Keys of 8 hexadecimal characters (2^32 keys) that tell every probe pair apart: the
    key space alone is the feedback, cited as such. When a pair also shares a key (here one
    the second process does not repeat, so the search does not meet it), the pairs' line
    comes first and the key space after it."""
    from grader.lessons.prefix_keys import key_scope, show_input
    small = ("every key is at most 8 characters of hexadecimal: about 2^32 keys at most, so among the blocks a "
             "busy cache holds two inputs share a key by chance, two scopes among them (a key needs at least 64 bits)")
    short = lambda t, process, n: _digest(*t)[:8]
    m = key_scope(_key_context([("scope", ("a", "", (1,)), ("b", "", (1,)))], short), {})
    assert (m.value, m.feedback, m.evidence) == (0.0, small, ("key-space",)), m
    a, b = ("c", "", (1,)), ("d", "", (1,))
    merged = {a: ("0123abcd",) * 2 + ("4567abcd",), b: ("0123abcd",) * 2 + ("89abcdef",)}
    key = lambda t, process, n: merged[t][2 if process else min(n, 1)] if t in merged else short(t, process, n)
    m = key_scope(_key_context([("scope", ("a", "", (1,)), ("b", "", (1,))), ("scope", a, b)], key), {})
    assert m.value == 0.0
    assert m.feedback == (f"1 of 2 pairs of scopes wrong; first, {show_input(a)} vs {show_input(b)}: both got "
                          f"'0123abcd': two scopes share a key: a hit would cross tenants; and {small}"), m.feedback


def test_key_deterministic_catches_a_second_process_key_either_side_of_the_first():
    """Whether the second process's key sorts before or after the first's, it is another."""
    from grader.lessons.prefix_keys import key_deterministic, show_input
    lo, k, hi = sorted(_digest(x) for x in "abc")
    a, b, c = ("a", "", (1,)), ("b", "", (1,)), ("c", "", (1,))
    for other in (lo, hi):
        ctx = _key_context([("scope", a, b), ("scope", b, c)], _askings({a: (k, k, other)}))
        m = key_deterministic(ctx, {})
        assert m.value == pytest.approx(2 / 3), m
        assert m.feedback.startswith(f"1 of 3 inputs asked three times wrong; first, {show_input(a)}: gave one key "
                                     "in one process and another key in a second process"), m.feedback


def test_key_deterministic_reads_a_constant_key_from_the_first_asking():
    """One key for every input the first time each is asked (and others after) is a constant
    key, as key-scope-separation and key-position read it, not a key asked again."""
    from grader.lessons.prefix_keys import key_deterministic
    ctx = _key_context([("scope", ("a", "", (1,)), ("b", "", (1,))), ("parent", ("a", "p", (1,)), ("a", "q", (1,)))],
                       lambda t, process, n: "k" if (process, n) == (0, 0) else _digest(*t))
    m = key_deterministic(ctx, {})
    assert (m.value, m.feedback) == (0.0, "prefix_key gave the same answer, 'k', to all 4 inputs: an answer that "
                                          "ignores its inputs shows none of the property"), m


def test_what_the_key_search_shows_crosses_checks_frozen():
    """Searched is kept in the run's memo that every key criterion reads: none may change it."""
    import dataclasses
    from grader.lessons.prefix_keys import Searched
    with pytest.raises(dataclasses.FrozenInstanceError):
        Searched({}, "").small_space = "x"


def test_a_key_short_on_one_length_class_is_judged_on_that_class():
    """Keys of 32 hexadecimal characters for most inputs and of 8 for many others: the
    longest key read as 2^128 keys, and the short ones' 2^32 went unseen."""
    from grader.lessons.key_search import SHARED_AFTER, key_space
    rng = random.Random(5)
    long = [f"{rng.getrandbits(128):032x}" for _ in range(100)]
    short = [f"{rng.getrandbits(32):08x}" for _ in range(SHARED_AFTER)]
    assert key_space(long) is None
    assert key_space(long + short)[:2] == ("hexadecimal", 8)
    # Too few short keys to show their class: the longest key judges, as before.
    assert key_space(long + short[:SHARED_AFTER - 1]) is None
    # Keys of several lengths, each long enough, are no small space.
    assert key_space(long + [k[:20] for k in long[:30]]) is None


def test_a_key_short_on_page_long_blocks_loses_scope_separation_on_hidden_probes(tmp_path, secret):
    """Graded on the hidden probes alone (no run): the search's page-long blocks and the
    hidden blocks of 16 tokens get 8 hexadecimal characters, the rest 64."""
    course = find_course(str(ROOT))
    report = grade_submission("lesson4", load_submission(wrong_file("key_short_on_pages", tmp_path)), course,
                              mode="grade", cases=lesson4.hidden_probes(secret))
    got = {c.id: c for c in report.criteria}
    scope = got["key-scope-separation"]
    assert scope.score == 0, scope.feedback
    for words in ("8 characters of hexadecimal", "(others are up to 64 characters)", "about 2^32 keys at most"):
        assert words in scope.feedback, scope.feedback
    assert got["key-position"].score == got["key-position"].max_score, got["key-position"].feedback


def test_of_two_scopes_with_as_many_keys_the_first_by_name_is_the_one_named():
    """Two scopes, each asked 20 times, each with keys of 4 hexadecimal characters after 4
    every key of the scope holds alike: the one told is the first by name, whatever the
    order the search met them in."""
    from grader.lessons.prefix_keys import _small_in_scope
    rng = random.Random(3)
    usable = [((scope, "", (i,)), f"{head}{v:04x}") for scope, head in (("zeta", "ffff"), ("alpha", "eeee"))
              for i, v in enumerate(rng.sample(range(1 << 16), 20))]
    said = _small_in_scope(usable)
    assert said.startswith("for one scope ('alpha'), beside the 4 characters every key holds alike, every key is at "
                           "most 4 characters of hexadecimal"), said


def test_a_long_text_cut_short_keeps_the_quote_it_opens_with():
    """ascii() writes a text holding ' (and no ") between double quotes; the cut text once
    closed it with ' instead: "it's a very long...' (46 characters)."""
    from grader.lessons.prefix_keys import show_input
    scope = "it's a very long scope name of many characters"
    assert show_input((scope, "", (1,))) == 'prefix_key("it\'s a very long..." (46 characters), \'\', (1,))'
    # Both quotes in it: written in ' as before, each ' inside escaped.
    assert show_input(("s", "a'b\"c" * 9, (1,))) == "prefix_key('s', 'a\\'b\"ca\\'b\"ca\\'b\"ca...' (45 characters), (1,))"


@pytest.mark.parametrize("got, want, table, share, asked", [
    (990, 1000, 500, 0.99, False),      # at the target: the table's run is not made
    (900, 1000, 950, 900 / 950, True),  # the table left fewer: hits over the table's
    (900, 1000, 1200, 0.9, True),       # the table left more: the oracle's run stays
    (900, 1000, 0, 0.9, True),          # nothing to hit under the table: the oracle's run stays
])
def test_the_hit_rate_takes_the_tables_run_only_below_the_target_and_only_when_fewer(
        monkeypatch, got, want, table, share, asked):
    from types import SimpleNamespace
    from grader.engine.cases import Case
    from grader.engine.learner_policy import CallLog
    from grader.lessons import cancellation_runs as runs
    case = Case("scenario", "s", "public", SimpleNamespace(), "s")
    made = []
    monkeypatch.setattr(runs, "learner_run", lambda ctx, c: runs.LearnerRun(
        SimpleNamespace(violations=()), CallLog(), 1))
    monkeypatch.setattr(runs, "served", lambda run: "")
    monkeypatch.setattr(runs, "hits_in_place", lambda run: got)
    monkeypatch.setattr(runs, "oracle_hits", lambda c: want)
    monkeypatch.setattr(runs, "table_hits", lambda ctx, c, out: made.append(c) or table)
    m = runs.run_hit_rate(CheckContext(None, [case]), {})
    assert m.value == pytest.approx(share) and bool(made) == asked, m
    named = f"under your on_event the worker's exact keys and publishing found {table} " in m.feedback
    assert named == (asked and 0 < table < want), m.feedback


def test_a_run_criterion_is_the_share_of_clean_scenarios_and_names_the_first_fault(monkeypatch):
    """Three scenario runs: one clean, one with two leaks and a double release, one with a
    leak. The criterion is the clean share, 1/3 (not a share of faults, nor of runs with
    one); its feedback is the first faulty run's first finding with that run's tally, and
    it cites both faulty runs."""
    from types import SimpleNamespace
    from grader.engine.cases import Case
    from grader.engine.learner_policy import CallLog
    from grader.lessons import cancellation_runs as runs
    cases = [Case("scenario", name, "public", SimpleNamespace(), name) for name in "abc"]
    found = {"a": [], "b": [("leaks", "r1 leaked"), ("double releases", "r3 released twice"),
                            ("leaks", "r2 leaked")],
             "c": [("leaks", "r7 leaked")]}
    monkeypatch.setattr(runs, "learner_run", lambda ctx, c: runs.LearnerRun(
        SimpleNamespace(name=c.name), CallLog(), 1))
    monkeypatch.setattr(runs, "served", lambda run: "")
    m = runs._run_measure(CheckContext(None, cases), ("on_event",), lambda run: found[run.name], "noun")
    assert m.value == pytest.approx(1 / 3)
    assert m.feedback == "public scenario b: r1 leaked (2 leaks, 1 double releases in this run)"
    assert m.evidence == (cases[1].cite, cases[2].cite)
    found.update(b=[], c=[])
    m = runs._run_measure(CheckContext(None, cases), ("on_event",), lambda run: found[run.name], "noun")
    assert (m.value, m.feedback) == (1.0, "none in 3 scenario runs: noun")


def test_hits_in_place_are_the_runs_last_hit_count_less_its_wrong_hits():
    """The series counts every hit so far (the last value is the run's), and a hit across
    scopes or at the wrong position is no hit; a run with no step has none, and wrong hits
    never make the count negative."""
    from types import SimpleNamespace
    from grader.lessons import cancellation_runs as runs

    def run(series, *kinds):
        return SimpleNamespace(series={"prefix_hits": series},
                               violations=tuple(SimpleNamespace(kind=k) for k in kinds))
    assert runs.hits_in_place(run([0, 2, 7], "cross_scope_hit", "leak", "wrong_prefix_hit")) == 5
    assert runs.hits_in_place(run([3, 4])) == 4
    assert runs.hits_in_place(run([])) == runs.hits_in_place(run([], "cross_scope_hit")) == 0
    assert runs.hits_in_place(run([1], "cross_scope_hit", "wrong_prefix_hit")) == 0


def _record(**fields):
    from types import SimpleNamespace
    base = dict(cancel_s=None, admitted_s=None, released_s=None, fence_s=None)
    return SimpleNamespace(**{**base, **fields})


@pytest.mark.parametrize("fields, at_fence, when_served", [
    (dict(cancel_s=1.0, admitted_s=0.5, released_s=2.0, fence_s=2.0), True, True),
    (dict(cancel_s=1.0, admitted_s=1.0, released_s=1.5, fence_s=2.0), False, True),    # early
    (dict(cancel_s=1.0, admitted_s=1.5, released_s=2.5, fence_s=2.0), False, False),   # lazy
    (dict(cancel_s=1.0), False, False),                        # cancelled while it waited
    (dict(admitted_s=0.5, released_s=2.0, fence_s=2.0), False, False),   # never cancelled
])
def test_what_a_run_must_show_before_a_criterion_can_judge_it(fields, at_fence, when_served):
    """A release at the fence is a cancelled request released exactly then (not before, not
    after, and not a request never cancelled or never released); a cancel while served is
    one at or after admission."""
    from grader.engine.learner_policy import CallLog
    from grader.lessons import cancellation_runs as runs
    out = runs.LearnerRun(_SimpleRun(requests=[_record(**fields)]), CallLog())
    assert runs._reclaimed_at_fence(out) is at_fence
    assert runs._cancelled_when_served(out) is when_served


class _SimpleRun:
    def __init__(self, requests=(), hits=(), violations=()):
        self.requests, self.violations = list(requests), tuple(violations)
        self.series = {"prefix_hits": list(hits)}


def test_one_hit_or_one_published_page_is_enough_to_judge_keys_and_publishing():
    from grader.engine.learner_policy import CallLog
    from grader.lessons import cancellation_runs as runs
    assert runs._hit(runs.LearnerRun(_SimpleRun(hits=[0, 1]), CallLog()))
    assert not runs._hit(runs.LearnerRun(_SimpleRun(hits=[0, 0]), CallLog()))
    assert runs._published(runs.LearnerRun(_SimpleRun(), CallLog(), 1))
    assert not runs._published(runs.LearnerRun(_SimpleRun(), CallLog(), 0))


def test_a_run_criterion_with_no_scenario_earns_nothing():
    from grader.lessons import cancellation_runs as runs
    m = runs._run_measure(CheckContext(None, []), ("on_event",), lambda run: [], "noun")
    assert (m.value, m.feedback) == (0.0, "no scenarios to run")
    assert runs.run_hit_rate(CheckContext(None, []), {}).value == 0.0


def test_the_oracles_hits_are_kept_on_disk_for_public_scenarios_only(monkeypatch):
    from grader.engine.cases import Case
    from grader.lessons import cancellation_runs as runs
    kept = {}
    monkeypatch.setattr(runs, "figures", lambda kind, key, compute, *, needs, persist: kept.setdefault(
        key, persist) and 0)
    for visibility in ("public", "hidden"):
        runs.oracle_hits(Case("scenario", visibility, visibility, {"scenario": visibility}, visibility))
    assert list(kept.values()) == [True, False]


def _hit_rate(monkeypatch, shares: dict, table=0, violations=()):
    """run_hit_rate over scenarios named by ``shares`` ({name: (got, want)})."""
    from types import SimpleNamespace
    from grader.engine.cases import Case
    from grader.engine.learner_policy import CallLog
    from grader.lessons import cancellation_runs as runs
    cases = [Case("scenario", name, "public", SimpleNamespace(), name) for name in shares]
    monkeypatch.setattr(runs, "learner_run", lambda ctx, c: runs.LearnerRun(
        _SimpleRun(violations=violations, hits=[c.name]), CallLog(), 1))
    monkeypatch.setattr(runs, "served", lambda run: "")
    monkeypatch.setattr(runs, "hits_in_place", lambda run: shares[run.series["prefix_hits"][0]][0])
    monkeypatch.setattr(runs, "oracle_hits", lambda c: shares[c.name][1])
    monkeypatch.setattr(runs, "table_hits", lambda ctx, c, out: table)
    return runs.run_hit_rate(CheckContext(None, cases), {})


def test_the_hit_rate_is_the_worst_scenarios_share_and_names_the_first_of_equals(monkeypatch):
    m = _hit_rate(monkeypatch, {"a": (18, 20), "b": (10, 20), "c": (20, 20), "d": (10, 20)})
    assert m.value == pytest.approx(0.5) and m.feedback.startswith("public scenario b: 10 prefix hits")
    m = _hit_rate(monkeypatch, {"a": (20, 20), "b": (19, 20), "c": (30, 20)})
    assert m.value == pytest.approx(0.95) and m.feedback.startswith("public scenario b: 19 ")
    # More hits than the oracle's, or an oracle with none, is the whole share, not more.
    assert _hit_rate(monkeypatch, {"a": (30, 20)}).value == 1.0
    assert _hit_rate(monkeypatch, {"a": (3, 0)}).value == 1.0


def test_the_hit_rate_at_the_target_asks_no_table_run_and_caps_the_tables_share(monkeypatch):
    # At exactly the target share, the learner's own table is not asked for fewer hits.
    m = _hit_rate(monkeypatch, {"a": (19, 20)}, table=10)
    assert m.value == pytest.approx(0.95) and "under your on_event" not in m.feedback
    assert m.feedback.endswith("(95%; at least 95% is the target)"), m.feedback     # and no hint
    # Below it, a table that leaves fewer hits is the measure, and more than it is all of it.
    m = _hit_rate(monkeypatch, {"a": (12, 20)}, table=10)
    assert m.value == 1.0 and "found 10 (the oracle's run, which releases at the fence, 20)" in m.feedback
    # A table that leaves as many as the oracle's run is no excuse.
    m = _hit_rate(monkeypatch, {"a": (12, 20)}, table=20)
    assert m.value == pytest.approx(0.6) and "under your on_event" not in m.feedback


def test_a_low_hit_rate_quotes_the_first_unusable_key_or_publish_answer(monkeypatch):
    from types import SimpleNamespace
    violations = [SimpleNamespace(kind="cross_scope_hit", detail="r1 hit across scopes"),
                  SimpleNamespace(kind="leak", detail="r2 leaked"),
                  SimpleNamespace(kind="invalid_decision", detail="on_event gave no action"),
                  SimpleNamespace(kind="invalid_decision", detail="prefix_key gave no usable key: 7")]
    m = _hit_rate(monkeypatch, {"a": (2, 20)}, violations=violations)
    assert m.feedback.endswith("(the worker could not use some answers: prefix_key gave no usable key: 7)")
    m = _hit_rate(monkeypatch, {"a": (2, 20)}, violations=violations[:3])
    assert "could not use" not in m.feedback and "must get the same keys" in m.feedback


def test_a_run_counts_the_pages_publishable_chose_among_those_offered(monkeypatch):
    """Each page chosen once, however often it is named; an answer naming a page never
    offered is refused whole by the worker, so it publishes nothing."""
    from dataclasses import dataclass, replace
    from types import SimpleNamespace
    from typing import Callable
    from grader.engine.cases import Case
    from grader.lessons import cancellation_runs as runs
    answers = {(0, 1, 2): [0, 2], (3, 4): [3, 3], (5,): [6], (7, 8): [8, 7], (9,): []}

    @dataclass(frozen=True)
    class Policy:
        publishable: Callable = lambda pages: answers[tuple(p.index for p in pages)]

        def with_(self, **fields):
            return replace(self, **fields)

    def run(policy):
        for offered in answers:
            policy.publishable(tuple(SimpleNamespace(index=i) for i in offered))
        return "the run"
    monkeypatch.setattr(runs, "learner_decisions", lambda sandbox, functions, log: {"on_event": "table"})
    monkeypatch.setattr(runs, "lesson_policy", lambda decisions, sheet: Policy())
    case = Case("scenario", "s", "public", SimpleNamespace(sheet={}, run=run), "s")
    out = runs._learner_run(None, case, reading=[])
    assert (out.run, out.published, out.table) == ("the run", 2 + 1 + 2, "table")


def test_a_request_that_failed_otherwise_is_no_release_while_served():
    """Only the worker's own words for pages released under a running request make one: a
    request that failed for another reason (it never finished, it never got in) is not."""
    from grader.lessons.cancellation_runs import early_releases
    from types import SimpleNamespace

    def run(outcome, reason, released=None):
        return SimpleNamespace(requests=[_record(id="r1", outcome=outcome, reason=reason,
                                                 released_s=released)])
    assert early_releases(run("failed", "did not finish")) == []
    assert early_releases(run("failed", "never admitted: waited until the end of the run")) == []
    assert [what for what, _ in early_releases(run(
        "failed", "its pages were released while it was running", 1.5))] == ["releases while served"]


def test_a_run_with_no_step_has_no_prefix_hit():
    from grader.lessons.cancellation_runs import prefix_hits
    assert prefix_hits(_SimpleRun(hits=[])) == 0
    assert prefix_hits(_SimpleRun(hits=[0, 3, 5])) == 5


def test_a_table_that_leaves_one_hit_is_a_table_that_leaves_some(monkeypatch):
    m = _hit_rate(monkeypatch, {"a": (1, 20)}, table=1)
    assert m.value == 1.0 and "found 1 (the oracle's run" in m.feedback

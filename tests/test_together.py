"""grader.engine.together: several runs' learner calls in shared round trips.

What must hold: each run sees exactly the answers, and the learner exactly the calls, of
the run made alone; only the order of the calls across runs interleaves, a round at a
time, in a fixed order. The expectations here are the runs made one after the other.
"""
import textwrap

import pytest

from grader.engine.sandbox import CallResult, Sandbox
from types import SimpleNamespace

from grader.engine.together import memo_runs, together


class Recording:
    """A sandbox stand-in whose learner is f(x) = 2x + 1; it keeps every frame it was sent."""

    def __init__(self):
        self.frames = []        # each call_each / call_many: the calls it held
        self.budget = Budget()

    @staticmethod
    def answer(fname, args):
        return CallResult("ok", 2 * args[0] + 1) if fname == "f" else CallResult("missing")

    def call(self, fname, *args):
        self.frames.append([(fname, args)])
        return self.answer(fname, args)

    def call_each(self, calls):
        self.frames.append(list(calls))
        return [self.answer(f, a) for f, a in calls]

    def call_many(self, fname, arg_tuples):
        self.frames.append([(fname, a) for a in arg_tuples])
        return [self.answer(fname, a) for a in arg_tuples]


class Budget:
    def __init__(self):
        self.charged = 0.0

    def charge(self, seconds):
        assert seconds >= 0
        self.charged += seconds


def chain(start, length):
    """A run whose every call depends on the answer before it, as a worker's run does."""
    def job(sandbox):
        x, seen = start, []
        for _ in range(length):
            x = sandbox.call("f", x).value
            seen.append(x)
        return seen
    return job


def alone(start, length):
    x, out = start, []
    for _ in range(length):
        x = 2 * x + 1
        out.append(x)
    return out


def test_each_run_gets_the_answers_it_would_alone_in_one_frame_a_round():
    lengths = [3, 0, 5, 1]
    box = Recording()
    got = together(box, [chain(10 * i, n) for i, n in enumerate(lengths)])
    assert got == [alone(10 * i, n) for i, n in enumerate(lengths)]
    # A round holds one call of every unfinished run, in run order: as many frames as the
    # longest run has calls, not one per call.
    assert len(box.frames) == max(lengths) == 5
    assert [len(f) for f in box.frames] == [3, 2, 2, 1, 1]
    assert box.frames[0] == [("f", (0,)), ("f", (20,)), ("f", (30,))]
    # Run 0's second call carries its first answer: no call is sent before it is asked.
    assert box.frames[1][0] == ("f", (1,))


def test_a_table_read_keeps_its_own_frame_and_the_rounds_go_on():
    def table(sandbox):
        return [r.value for r in sandbox.call_many("f", [(1,), (2,)])] + chain(5, 2)(sandbox)
    box = Recording()
    assert together(box, [table, chain(0, 2)]) == [[3, 5, 11, 23], [1, 3]]
    assert box.frames == [[("f", (1,)), ("f", (2,))], [("f", (0,))], [("f", (5,)), ("f", (1,))],
                          [("f", (11,))]]


def test_one_run_is_made_with_the_sandbox_itself():
    box, given = Recording(), []

    def job(sandbox):
        given.append(sandbox)
        return chain(1, 2)(sandbox)
    assert together(box, [job]) == [[3, 7]]
    assert given == [box] and given[0] is box          # no hub, no proxy: nothing to share
    assert box.frames == [[("f", (1,))], [("f", (3,))]]
    # Two runs already share their rounds, each through the hub's proxy.
    given.clear()
    assert together(box, [job, job]) == [[3, 7], [3, 7]]
    assert len(given) == 2 and all(g is not box for g in given)


def test_a_failing_run_ends_the_others_and_propagates():
    ended = []

    def careful(sandbox):
        try:
            return chain(0, 10)(sandbox)
        finally:
            ended.append("careful")

    def broken(sandbox):
        sandbox.call("f", 1)
        raise ValueError("the worker broke")

    box = Recording()
    try:
        together(box, [careful, broken])
    except ValueError as exc:
        assert str(exc) == "the worker broke"
        # Its finally ran before the failure reached the caller, not whenever the
        # suspended run happens to be collected: nothing is left suspended.
        ended.append("propagated")
    assert ended == ["careful", "propagated"]
    assert len(box.frames) == 1             # nothing was sent after the failure


def test_the_runs_time_between_rounds_is_charged_to_the_budget(monkeypatch):
    """Each round's time, from its answers to the runs' next calls, is charged once."""
    from grader.engine import together as module
    clock = iter(range(3, 1000, 7))     # every reading 7 s after the one before
    monkeypatch.setattr(module, "time", SimpleNamespace(monotonic=lambda: next(clock)))
    box = Recording()
    together(box, [chain(0, 2), chain(5, 3)])
    assert len(box.frames) == 3             # three rounds, each read twice: 7 s each
    assert box.budget.charged == 3 * 7


SOURCE = textwrap.dedent('''
    def f(i):
        if i < 0:
            while True:
                pass
        return 2 * i + 1
''')


def test_call_each_answers_as_separate_calls_and_a_hang_costs_only_itself():
    # A 2 s deadline: honest calls answer in milliseconds even on a machine ten times slower.
    with Sandbox(SOURCE, "exercise.py", call_timeout_s=2, run_timeout_s=120) as box:
        calls = [("f", (1,)), ("f", (-1,)), ("f", (2,)), ("f", (-2,)), ("f", (-3,)),
                 ("nope", ()), ("f", (3,))]
        got = box.call_each(calls)
        assert [r.status for r in got] == ["ok", "timeout", "ok", "timeout", "timeout",
                                           "missing", "ok"]
        assert [r.value for r in got if r.ok] == [3, 5, 7]
        # Three hangs, and still every later call is made: unlike call_many's probes, each
        # call here stands for a run's decision and is owed its own answer.
        assert got[4].detail == "f() did not return within 2 s"
        assert "nope" in got[5].detail
        assert box.call_each([]) == []


GRADED = [("lesson2", "raises_on_hits"), ("lesson3", "wrong_types"), ("lesson4", "key_salted")]


@pytest.mark.parametrize("lesson,template", GRADED)
def test_a_grade_with_its_runs_together_is_the_grade_made_alone(lesson, template, monkeypatch):
    """Every criterion's score, feedback and evidence, for a submission that fails some
    calls (lesson 2), one whose run stops at a failed call (lesson 3) and one whose keys
    are salted per process (lesson 4). bench/ compared all 56 quick templates likewise."""
    from classroom import templates
    from conftest import SECRET, grade
    from grader.engine import together as module

    def criteria():
        report = grade(lesson, templates(lesson)[template], "grade", SECRET)
        return [(c.id, c.score, c.feedback, c.public_feedback, c.evidence) for c in report.criteria]

    made_together = criteria()
    monkeypatch.setattr(module, "together", lambda sandbox, jobs: [job(sandbox) for job in jobs])
    assert made_together == criteria()


def test_memo_runs_makes_each_run_of_its_family_once_together():
    """The first measure that needs one run makes the runs of every case of its family not
    made yet, in one together(): each once, none of another family, each under its name."""
    def case(name, family):
        return SimpleNamespace(name=name, family=family, visibility="hidden")
    a, b, c = case("a", "run"), case("b", "run"), case("c", "run")
    # Families named on both sides of "run": neither is made.
    probe, trial, done = case("p", "probe"), case("t", "trial"), case("d", "run")
    ctx = SimpleNamespace(sandbox=Recording(), public_sandbox=None, cases=[probe, a, b, done, trial, c],
                          memo={("run", "d"): "made before"})
    made = []

    def make(sandbox, case):
        made.append(case.name)
        return f"run of {case.name}"
    assert memo_runs(ctx, b, make) == "run of b"
    assert sorted(made) == ["a", "b", "c"] and made[0] == "b"
    assert ctx.memo == {("run", "a"): "run of a", ("run", "b"): "run of b",
                        ("run", "c"): "run of c", ("run", "d"): "made before"}
    assert memo_runs(ctx, a, make) == "run of a" and len(made) == 3      # kept, not made again


def test_a_public_cases_run_is_made_in_the_public_child_whichever_measure_needs_it():
    """A score's measure (the hidden child's) may be the first to need a family's runs;
    its public cases are still made in the child that never hears a hidden input, since
    the runs are kept for every later criterion's public feedback too."""
    def case(name, visibility):
        return SimpleNamespace(name=name, family="run", visibility=visibility, n=len(name))
    cases = [case("p", "public"), case("hh", "hidden"), case("qqq", "public"), case("hhhh", "hidden")]
    public, hidden = Recording(), Recording()
    ctx = SimpleNamespace(sandbox=hidden, public_sandbox=public, cases=cases, memo={})

    def make(sandbox, case):
        return sandbox.call("f", case.n).value
    assert memo_runs(ctx, cases[1], make) == 5                          # 2 * 2 + 1
    assert {k[1]: v for k, v in ctx.memo.items()} == {"p": 3, "hh": 5, "qqq": 7, "hhhh": 9}
    assert public.frames == [[("f", (1,)), ("f", (3,))]]               # the public cases alone
    assert hidden.frames == [[("f", (2,)), ("f", (4,))]]               # the hidden cases alone
    # A measure of one child (a check, or a criterion on public cases) makes every run
    # there, all of them together: one frame for their one round.
    for of_public in (None, "itself"):
        alone = Recording()
        ctx = SimpleNamespace(sandbox=alone, public_sandbox=of_public and alone, cases=cases, memo={})
        memo_runs(ctx, cases[0], make)
        assert alone.frames == [[("f", (1,)), ("f", (2,)), ("f", (3,)), ("f", (4,))]]

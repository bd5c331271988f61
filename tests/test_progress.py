"""The batch's progress bar: one redrawn line on a terminal, a plain line every few seconds
in a log, nothing when turned off; time is a fake clock, never slept."""
import io
import threading

from grader.engine.progress import Progress


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_in_a_log_a_plain_line_every_few_seconds():
    clock, log = Clock(), io.StringIO()
    bar = Progress(10, "grading lesson1", stream=log, log_every_s=5.0, clock=clock)
    for t in (1, 2, 3):
        clock.now = 100 + t
        bar.advance()
    assert log.getvalue() == ""                       # not yet 5 s: nothing
    clock.now = 106.0
    bar.advance()
    lines = log.getvalue().splitlines()
    assert lines == ["grading lesson1 [###########.................] 4/10  40/min  elapsed 0:06  left 0:09"]
    bar.finish()                                      # the same moment: not written twice
    assert log.getvalue().splitlines() == lines
    bar = Progress(10, "grading lesson1", stream=log, log_every_s=5.0, clock=clock)
    clock.now = 107.0
    bar.advance()
    bar.finish()
    assert "\r" not in log.getvalue() and log.getvalue().count("\n") == 2
    assert log.getvalue().splitlines()[-1].startswith("grading lesson1 [") and " 1/10 " in log.getvalue()
    bar.finish()                                      # again, from an error path: nothing
    assert log.getvalue().count("\n") == 2


def test_between_results_the_line_keeps_moving():
    """A submission that takes minutes: in a log a line is still due every few seconds,
    on a terminal the elapsed time is redrawn."""
    clock, log = Clock(), io.StringIO()
    bar = Progress(12, "grading lesson2", stream=log, log_every_s=5.0, clock=clock)
    clock.now = 103.0
    bar.tick()
    assert log.getvalue() == ""
    clock.now = 110.0
    bar.tick()
    assert log.getvalue() == "grading lesson2 [............................] 0/12  0/min  elapsed 0:10  left ?\n"
    clock, tty = Clock(), Terminal()
    bar = Progress(3, "grading lesson2", stream=tty, clock=clock)
    clock.now += 65
    bar.tick()
    assert tty.getvalue() == "\rgrading lesson2 [............................] 0/3  0/min  elapsed 1:05  left ?"


def test_the_heartbeat_ticks_by_itself_and_stops_with_the_bar():
    tty = Terminal()
    bar = Progress(3, "x", stream=tty, heartbeat_s=0.01)
    for _ in range(3000):                       # polled, never timed: however slow the machine
        if tty.getvalue().count("\r") >= 2:
            break
        threading.Event().wait(0.01)
    assert tty.getvalue().count("\r") >= 2 and bar.done == 0
    bar.finish()
    assert not bar._beat.is_alive()
    written = tty.getvalue()
    threading.Event().wait(0.05)
    assert tty.getvalue() == written and written.endswith("\n")


def test_on_a_terminal_one_line_redrawn():
    clock, tty = Clock(), Terminal()
    bar = Progress(3, "grading lesson2", stream=tty, clock=clock)
    for _ in range(3):
        clock.now += 30
        bar.advance()
    bar.finish()
    text = tty.getvalue()
    assert text.count("\r") == 4 and text.count("\n") == 1
    assert text.endswith("3/3  2/min  elapsed 1:30  left 0:00\n")


def test_turned_off_or_nothing_to_do_writes_nothing():
    for bar in (Progress(5, "x", stream=io.StringIO(), enabled=False), Progress(0, "x", stream=io.StringIO())):
        bar.advance()
        bar.finish()
        assert bar.stream.getvalue() == ""


def test_work_of_unknown_size_is_a_count_and_a_quick_one_says_nothing():
    """An experiment's worker runs: no total, so no bar and no estimate; nothing at all
    before delay_s, so the default settings (a second or two) print no line."""
    clock, log = Clock(), io.StringIO()
    quick = Progress(None, "goodput", stream=log, clock=clock, delay_s=3.0, unit="worker runs")
    clock.now = 101.0
    quick.advance(4)
    quick.tick()
    quick.finish()
    assert log.getvalue() == ""
    slow = Progress(None, "goodput", stream=log, clock=clock, delay_s=3.0, log_every_s=5.0, unit="worker runs")
    clock.now = 107.0
    slow.advance(20)
    assert log.getvalue() == "goodput: 20 worker runs  elapsed 0:06\n"
    clock.now = 109.0
    slow.advance(10)
    slow.finish()
    assert log.getvalue().splitlines()[-1] == "goodput: 30 worker runs  elapsed 0:08"
    tty = Terminal()
    live = Progress(None, "prefix-ownership", stream=tty, clock=clock, delay_s=3.0, unit="worker runs")
    clock.now += 2.0
    live.tick()
    assert tty.getvalue() == ""
    clock.now += 2.0
    live.tick()
    assert tty.getvalue() == "\rprefix-ownership: 0 worker runs  elapsed 0:04"

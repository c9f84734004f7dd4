"""scripts/progress.py: the shared progress line (done, left, an estimate), written only to a terminal."""
import io
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from progress import Progress, format_duration  # noqa: E402


class Terminal(io.StringIO):
    def isatty(self):
        return True


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_estimate_from_the_time_per_item_so_far():
    out, clock = Terminal(), Clock()
    p = Progress("sweep", 12, stream=out, interval=0, clock=clock)
    clock.now += 90  # 3 items in 90 s: 30 s each, 9 left
    p.update(3)
    assert out.getvalue() == "sweep: 3/12 done, 9 left, about 4m 30s to go\n"
    clock.now += 270
    p.update(12)
    assert out.getvalue().splitlines()[-1] == "sweep: 12/12 done, 0 left, took 6m 00s"


def test_items_done_in_an_earlier_run_do_not_shorten_the_estimate():
    out, clock = Terminal(), Clock()
    p = Progress("sweep", 10, stream=out, interval=0, clock=clock)
    p.update(4, skipped=4)
    assert out.getvalue() == "sweep: 4/10 done, 6 left, no estimate yet\n"
    clock.now += 60
    p.update(5, skipped=4)  # one item timed, 60 s; five left
    assert out.getvalue().splitlines()[-1] == "sweep: 5/10 done, 5 left, about 5m 00s to go"


def test_quiet_when_not_a_terminal_and_throttled_on_one():
    piped = io.StringIO()
    p = Progress("sweep", 3, stream=piped, interval=0)
    for k in range(1, 4):
        p.update(k)
    assert piped.getvalue() == ""
    out, clock = Terminal(), Clock()
    p = Progress("bench", 100, stream=out, interval=2.0, clock=clock)
    for k in range(1, 100):
        clock.now += 0.1
        p.update(k)
    assert len(out.getvalue().splitlines()) == 5  # 9.9 s at most one line per 2 s (the first at once)
    p.update(100)  # the last line is always written
    assert out.getvalue().splitlines()[-1].startswith("bench: 100/100 done, 0 left, took ")


def test_durations():
    assert [format_duration(s) for s in (0, 12.4, 754, 7384)] == ["0s", "12s", "12m 34s", "2h 03m"]

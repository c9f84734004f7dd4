"""One progress line for long work in seqpar's Python scripts (sweep.py's points, bench_sdpa.py's
shapes): what is done, what is left and an estimate of the time left, from the average time per
item so far. It writes only when its stream is a terminal, so logs, pipes and CI output stay as
they were; a line at most every `interval` seconds, and always the last one."""
import sys
import time


def format_duration(seconds):
    """12 -> '12s', 754 -> '12m 34s', 7384 -> '2h 03m'."""
    s = int(round(max(0.0, seconds)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    return f"{s // 3600}h {(s % 3600) // 60:02d}m"


class Progress:
    def __init__(self, what, total, stream=None, interval=2.0, clock=time.monotonic):
        self.what = what
        self.total = total
        self.stream = sys.stderr if stream is None else stream
        self.interval = interval
        self.clock = clock
        self.start = clock()
        self.last = None
        isatty = getattr(self.stream, "isatty", None)
        self.enabled = bool(isatty and isatty())

    def line(self, done, skipped=0):
        """'sweep: 3/12 done, 9 left, about 4m 30s to go'. `skipped` items (finished in an earlier
        run) count as done but not towards the time per item."""
        left = max(0, self.total - done)
        text = f"{self.what}: {done}/{self.total} done, {left} left"
        timed = done - skipped
        if left == 0:
            return text + f", took {format_duration(self.clock() - self.start)}"
        if timed > 0:
            per_item = (self.clock() - self.start) / timed
            return text + f", about {format_duration(per_item * left)} to go"
        return text + ", no estimate yet"

    def update(self, done, skipped=0):
        """Writes the line when the stream is a terminal and `interval` has passed (or all is done)."""
        if not self.enabled:
            return
        now = self.clock()
        if done < self.total and self.last is not None and now - self.last < self.interval:
            return
        self.last = now
        self.stream.write(self.line(done, skipped) + "\n")
        self.stream.flush()

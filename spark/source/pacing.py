"""A partition's command budget: at most `rate` commands a second (0: no limit), and a record
of the most it sent within any one second, for the job's summary."""

from __future__ import annotations

import time
from collections import deque


class Pacer:
    def __init__(self, rate: float) -> None:
        self.rate = float(rate)
        self.sent = 0
        self.peak = 0  # most commands sent within one second
        self._burst = max(1.0, self.rate / 10)  # a tenth of a second's worth, at most
        self._tokens = self._burst
        self._last = time.monotonic()
        self._window: deque[tuple[float, int]] = deque()
        self._in_window = 0

    def take(self, n: int) -> None:
        """Count `n` commands as sent once the budget has paid for them: a batch waits until
        the commands before it and itself fit the rate, so no second sees more than the rate
        and a tenth of it (the burst an idle moment may save up)."""
        if self.rate > 0:
            now = time.monotonic()
            self._tokens = min(self._burst, self._tokens + (now - self._last) * self.rate)
            self._last = now
            self._tokens -= n
            if self._tokens < 0:
                time.sleep(-self._tokens / self.rate)
                self._tokens = 0.0
                self._last = time.monotonic()
        self._count(n)

    def correct(self, n: int) -> None:
        """Count `n` more (or fewer) commands than were taken: a script reports what it ran."""
        self.sent += n
        if self.rate > 0:
            self._tokens -= n

    def _count(self, n: int) -> None:
        now = time.monotonic()
        self.sent += n
        self._window.append((now, n))
        self._in_window += n
        while self._window and self._window[0][0] <= now - 1.0:
            self._in_window -= self._window.popleft()[1]
        self.peak = max(self.peak, self._in_window)

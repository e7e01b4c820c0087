"""How a commit retries after another writer won: a budget in count (`commit.max-retries`) and in time
(`commit.timeout`), spent when both are (while others hold the table, a writer keeps waiting for its turn for up to
the time budget, however many times it lost; a fast failure still gets its count of retries), and between attempts a wait growing exponentially from
`commit.min-retry-wait` to `commit.max-retry-wait`, drawn at random below that bound ("full jitter"), so writers
that collided once do not collide again in lockstep and each makes progress. The growth starts from the duration
of the attempt that failed when that is longer than the minimum wait (a write re-planned after a sequence conflict
takes as long as writing its files: waiting less than that only collides again)."""
from __future__ import annotations

import random
import time
from typing import Callable

from filestore.options import FileStoreOptions


class RetryBudget:
    """The retries of one commit (or one write re-planned after a sequence conflict)."""

    def __init__(self, options: FileStoreOptions, *, rng: random.Random | None = None,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> None:
        self.options = options
        self.retries = 0
        self._rng = rng or random.Random()
        self._clock = clock
        self._sleep = sleep
        self._started = clock()

    @property
    def elapsed_s(self) -> float:
        return self._clock() - self._started

    def next_wait_s(self, attempt_s: float = 0.0) -> float:
        o = self.options
        low = o.commit_min_retry_wait_ms
        base = max(low, attempt_s * 1000)
        cap = max(low, min(o.commit_max_retry_wait_ms, base * 2 ** min(self.retries, 32)))
        return self._rng.uniform(low, cap) / 1000

    def retry(self, attempt_s: float = 0.0) -> bool:
        """Wait before the next attempt and return True; False, at once, when the budget is spent. `attempt_s`:
        how long the attempt that just failed took."""
        o = self.options
        wait = self.next_wait_s(attempt_s)
        if self.retries >= o.commit_max_retries and (self.elapsed_s + wait) * 1000 > o.commit_timeout_ms:
            return False
        self._sleep(wait)
        self.retries += 1
        return True

    def describe(self) -> str:
        """What was spent, for the error a caller raises when `retry` said no."""
        o = self.options
        return (f"{self.retries} retries in {self.elapsed_s * 1000:.0f} ms (budget: {o.commit_max_retries} retries "
                f"and {o.commit_timeout_ms} ms)")

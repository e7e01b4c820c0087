"""How a commit retries after another writer won: a budget in count (`commit.max-retries`) and in time
(`commit.timeout`), whichever runs out first, and between attempts a wait growing exponentially from
`commit.min-retry-wait` to `commit.max-retry-wait`, drawn at random below that bound ("full jitter"), so writers
that collided once do not collide again in lockstep and each makes progress."""
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

    def next_wait_s(self) -> float:
        o = self.options
        low = o.commit_min_retry_wait_ms
        cap = max(low, min(o.commit_max_retry_wait_ms, low * 2 ** min(self.retries, 32)))
        return self._rng.uniform(low, cap) / 1000

    def retry(self) -> bool:
        """Wait before the next attempt and return True; False, at once, when the budget is spent."""
        o = self.options
        if self.retries >= o.commit_max_retries:
            return False
        wait = self.next_wait_s()
        if o.commit_timeout_ms is not None and (self.elapsed_s + wait) * 1000 > o.commit_timeout_ms:
            return False
        self._sleep(wait)
        self.retries += 1
        return True

    def describe(self) -> str:
        """What was spent, for the error a caller raises when `retry` said no."""
        limit = "" if self.options.commit_timeout_ms is None else f" of {self.options.commit_timeout_ms} ms"
        return f"{self.retries} retries in {self.elapsed_s * 1000:.0f} ms{limit}"

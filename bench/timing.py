"""Shared by the benchmarks: median wall time of a callable."""

from __future__ import annotations

import statistics
import time
from typing import Callable


def median_ms(fn: Callable[[], object], repeat: int, warmup: int = 5, max_s: float | None = None) -> float:
    """Median milliseconds of `repeat` calls of fn after `warmup` untimed ones. With max_s, timing
    stops early once the timed calls took that many seconds (at least three are timed), and the
    warm-up is cut to one call: for runtimes that take seconds a call."""
    for _ in range(1 if max_s else warmup):
        fn()
    times: list[float] = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
        if max_s is not None and len(times) >= 3 and sum(times) > max_s * 1e3:
            break
    return statistics.median(times)

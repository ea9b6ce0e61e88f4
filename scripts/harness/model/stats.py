"""Small statistics the harness and the renderer share.

scripts/http_load.py and scripts/echo_client.py carry copies of percentile and latency_summary
(they run without the harness); tests/harness/clients/test_standalone_copies.py keeps the copies identical to these.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence


def percentile(values: Sequence[float], percent: float) -> float:
    """Nearest rank: the smallest value with at least `percent`% of the values at or below it."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)  # linear when `values` is already sorted
    return ordered[max(1, math.ceil(percent / 100 * len(ordered))) - 1]


def latency_summary(latencies_ms: Sequence[float]) -> dict[str, float]:
    """Mean, nearest-rank p50/p90/p99 and max of per-request latencies in milliseconds."""
    ordered = sorted(latencies_ms)
    return {"mean": statistics.fmean(ordered), "p50": percentile(ordered, 50), "p90": percentile(ordered, 90),
            "p99": percentile(ordered, 99), "max": ordered[-1]}


MEDIAN_CONFIDENCE = 0.93  # the median's interval holds the true median at least this often


def median_interval(values: Sequence[float]) -> tuple[float, float, float]:
    """Where the median of the process lies: (low, high, confidence), distribution-free.

    Between the k-th lowest and the k-th highest of n independent runs, the true median lies
    with probability 1 − 2·P(Binomial(n, ½) < k), whatever the runs' distribution. We take the
    largest k (the narrowest interval) that keeps this at MEDIAN_CONFIDENCE or more. For five
    runs that is k = 1, the lowest and the highest (94%); for fifteen, the 4th from each end
    (96%). With four runs or fewer no interval reaches 93%: k = 1, and the confidence says how
    little the lowest and highest then promise.
    """
    ordered = sorted(values)
    count = len(ordered)
    if not count:
        raise ValueError("median interval of no values")

    def confidence(k: int) -> float:
        return 1 - 2 * sum(math.comb(count, below) for below in range(k)) / 2 ** count

    k = max((k for k in range(1, (count + 1) // 2 + 1) if confidence(k) >= MEDIAN_CONFIDENCE), default=1)
    return ordered[k - 1], ordered[count - k], confidence(k)


def interval_name(count: int) -> str:
    """What a table calls the interval of a median of `count` runs: "min–max", or "96% interval"."""
    low, high, confidence = median_interval(range(count))
    return "min–max" if (low, high) == (0, count - 1) else f"{confidence:.0%} interval"


def spread(values: Sequence[float]) -> dict[str, float]:
    """Median, min and max, and the median's interval (`median_interval`) with its width relative to the median."""
    middle = statistics.median(values)
    low, high = min(values), max(values)
    interval_low, interval_high, confidence = median_interval(values)
    return {"median": middle, "min": low, "max": high,
            "interval_low": interval_low, "interval_high": interval_high, "confidence": confidence,
            "relative_interval": (interval_high - interval_low) / middle if middle else 0.0}

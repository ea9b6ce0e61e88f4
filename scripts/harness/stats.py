"""Small statistics the harness and the renderer share."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence


def percentile(values: Sequence[float], percent: float) -> float:
    """Nearest-rank percentile: the smallest value with at least `percent`% of values at or below it."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    rank = max(1, math.ceil(percent / 100 * len(ordered)))
    return ordered[rank - 1]


def latency_summary(latencies_ms: Sequence[float]) -> dict[str, float]:
    """Mean, p50, p90, p99 and max of per-request latencies in milliseconds."""
    return {
        "mean": statistics.fmean(latencies_ms),
        "p50": percentile(latencies_ms, 50),
        "p90": percentile(latencies_ms, 90),
        "p99": percentile(latencies_ms, 99),
        "max": max(latencies_ms),
    }


def spread(values: Sequence[float]) -> dict[str, float]:
    """Median, min and max, and the range relative to the median (0.1 = 10%)."""
    middle = statistics.median(values)
    low, high = min(values), max(values)
    return {"median": middle, "min": low, "max": high,
            "relative_range": (high - low) / middle if middle else 0.0}

"""The statistics every benchmark reports, with one contract each."""

from __future__ import annotations

import math


def percentile(values: list[float], q: float) -> float | None:
    """The ``q``-th percentile (``q`` in 0–100) with linear interpolation (numpy's default); None for no values."""
    if not values:
        return None
    if not 0 <= q <= 100 or math.isnan(q):
        raise ValueError(f"percentile: q must lie in [0, 100], got {q}")
    s = sorted(float(v) for v in values)
    k = (len(s) - 1) * q / 100.0
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)

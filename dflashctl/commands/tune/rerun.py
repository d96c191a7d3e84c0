"""How far a second `tune` run may move a figure: the rerun interval over the rounds.

Each round relaunches every K, so the spread between rounds holds what a relaunch moves (the
server's start, the machine's load minutes apart). If rounds are independent draws of one
figure, the mean of another run's n rounds differs from this run's mean by a difference of two
means of n: it falls within mean ± t(0.975, n − 1) · s · √(2/n) about 95 % of the time (s: the
standard deviation over this run's rounds). The min–max over three rounds holds a fourth round
only half the time, which is why a second run's figures fell outside it.
"""

from __future__ import annotations

import math
import statistics

# Student's t, two-sided 95 % (the 0.975 quantile), by degrees of freedom
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
        9: 2.262, 10: 2.228}  # fmt: skip
T975_LARGE = 1.96  # beyond the table: the normal quantile


def rerun_interval(values: list[float]) -> list[float] | None:
    """[lo, hi] around the mean of per-round `values` where a second run of as many rounds
    lands 95 % of the time; None under two rounds (nothing to estimate the spread from)."""
    n = len(values)
    if n < 2:
        return None
    mean, s = statistics.fmean(values), statistics.stdev(values)
    half = T975.get(n - 1, T975_LARGE) * s * math.sqrt(2 / n)
    return [mean - half, mean + half]


def round_mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None

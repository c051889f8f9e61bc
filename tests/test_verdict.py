"""A run against its series: noise within the series' spread never fails; a real drop does."""

import numpy as np
import pytest

from goodbench.history.verdict import judge, level


def _runs(rng, n, cv=0.02, level_=10.0):
    return level_ * (1 + cv * rng.standard_normal(n))


def test_false_fails_stay_near_alpha_and_a_ten_percent_drop_fails():
    """2,000 nights of 2% Gaussian noise against windows of 20: the one-sided 0.1% band fails at most
    0.5% of them (measured 0.14% over 10,000, docs/history.md); a 10% drop fails most of them."""
    rng = np.random.default_rng(0)
    fails = drops = 0
    for _ in range(2000):
        window, v = _runs(rng, 20), _runs(rng, 1)[0]
        fails += not judge("goodput", v, window, "higher").passed
        drops += not judge("goodput", v * 0.9, window, "higher").passed
    assert fails <= 10, fails
    assert drops >= 1600, drops


def test_a_value_inside_the_spread_never_fails():
    rng = np.random.default_rng(1)
    window = _runs(rng, 20)
    for v in (window.min(), window.max(), np.median(window)):
        c = judge("goodput", v, window, "higher")
        assert c.judged and c.passed and c.limit < window.min()


def test_lower_is_better_judges_the_other_side():
    window = np.r_[100.0, 102, 98, 101, 99, 100, 103, 97]
    assert judge("ttft_p99", 80.0, window, "lower").passed  # faster is never a failure
    c = judge("ttft_p99", 130.0, window, "lower")
    assert c.judged and not c.passed and c.change == pytest.approx(0.3, abs=0.01)


def test_one_broken_night_does_not_widen_the_band():
    """A run at 30% of the level is a gross error: left out of the level and spread (5 robust sigmas,
    at most a tenth of the window), so the next real 10% drop still fails."""
    rng = np.random.default_rng(2)
    window = _runs(rng, 20)
    window[5] *= 0.3
    mean, sd, kept = level(window)
    assert kept == 19 and sd < 0.5
    assert not judge("goodput", 9.0, window, "higher").passed


def test_too_few_runs_and_no_value_are_not_judged():
    c = judge("goodput", 5.0, [10.0, 10.1, 9.9], "higher")
    assert not c.judged and c.passed and "needs 5" in c.note
    c = judge("goodput", None, [10.0] * 10, "higher")
    assert not c.judged and c.passed and "no value" in c.note


def test_a_deterministic_series_fails_only_beyond_the_minimum_change():
    window = [3.5] * 10
    assert judge("goodput", 3.48, window, "higher").passed  # -0.6%: under the 1% floor
    assert not judge("goodput", 3.4, window, "higher").passed  # -2.9%
    assert judge("goodput", 3.4, window, "higher", min_change=0.05).passed

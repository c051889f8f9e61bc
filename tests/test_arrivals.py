import math

import numpy as np
import pytest

from goodbench.arrivals import ArrivalSpec, offsets, parse_trace


def _cv(x):
    g = np.diff(x)
    return g.std() / g.mean()


def test_poisson_rate_and_cv():
    x = offsets(ArrivalSpec("poisson", rate=50.0), n=20000, seed=1)
    assert x[0] == 0.0 and np.all(np.diff(x) >= 0)
    assert (len(x) - 1) / x[-1] == pytest.approx(50.0, rel=0.03)
    assert _cv(x) == pytest.approx(1.0, abs=0.03)


@pytest.mark.parametrize("b", [0.25, 0.5, 2.0, 4.0])
def test_gamma_burstiness(b):
    x = offsets(ArrivalSpec("gamma", rate=20.0, burstiness=b), n=40000, seed=2)
    assert (len(x) - 1) / x[-1] == pytest.approx(20.0, rel=0.04)
    assert _cv(x) == pytest.approx(1 / math.sqrt(b), rel=0.05)  # CV of gamma(shape=b) = 1/sqrt(b)


def test_constant_spacing():
    x = offsets(ArrivalSpec("constant", rate=4.0), n=5)
    assert np.allclose(x, [0, 0.25, 0.5, 0.75, 1.0])


def test_seeded_reproducible_and_distinct():
    a = offsets(ArrivalSpec(rate=3.0), n=100, seed=7)
    assert np.array_equal(a, offsets(ArrivalSpec(rate=3.0), n=100, seed=7))
    assert not np.array_equal(a, offsets(ArrivalSpec(rate=3.0), n=100, seed=8))


def test_infinite_rate_sends_all_at_zero():
    assert np.all(offsets(ArrivalSpec(rate=math.inf), n=10) == 0)


def test_duration_bound_is_not_rescaled():
    x = offsets(ArrivalSpec(rate=10.0), duration_s=30.0, seed=3)
    assert x.max() < 30.0
    assert len(x) == pytest.approx(300, rel=0.15)


def test_ramp_up_is_slower_at_first():
    x = offsets(ArrivalSpec("constant", rate=10.0, ramp_up_s=10.0), n=200)
    early = np.sum(x < 5.0)
    late = np.sum((x >= 10.0) & (x < 15.0))
    # linear ramp: first 5 s carry rate*5^2/(2*10) = 12.5 expected arrivals; after the ramp 50 per 5 s
    assert early == pytest.approx(12.5, abs=2)
    assert late == pytest.approx(50, abs=2)


def test_onoff_mean_rate():
    s = ArrivalSpec("onoff", on_rate=40.0, off_rate=0.0, on_mean_s=1.0, off_mean_s=3.0)
    x = offsets(s, duration_s=2000.0, seed=4)
    assert len(x) / 2000.0 == pytest.approx(s.mean_rate, rel=0.1)  # 10 req/s
    assert _cv(x) > 1.5  # bursty


def test_trace_replay_with_scale():
    s = ArrivalSpec("trace", trace=(100.0, 100.5, 101.0, 103.0), time_scale=2.0)
    assert np.allclose(offsets(s, n=10), [0, 1, 2, 6])


def test_parse_trace_formats():
    assert parse_trace("timestamp,x\n1.5,a\n2.5,b\n", "csv") == (1.5, 2.5)
    assert parse_trace("3\n4\n", "csv") == (3.0, 4.0)
    assert parse_trace('{"timestamp": 1}\n{"t": 2}\n', "jsonl") == (1.0, 2.0)
    with pytest.raises(ValueError, match="line 2"):
        parse_trace('{"timestamp": 1}\nnope\n', "jsonl")


def test_invalid_specs():
    with pytest.raises(ValueError):
        ArrivalSpec("poisson", rate=0)
    with pytest.raises(ValueError):
        ArrivalSpec("weird")
    with pytest.raises(ValueError):
        ArrivalSpec("closed", concurrency=0)


def test_labels():
    assert ArrivalSpec("poisson", rate=8).label == "poisson@8.00"
    assert ArrivalSpec("closed", concurrency=64).label == "concurrency@64"
    assert ArrivalSpec("gamma", rate=2, burstiness=0.5).label == "gamma@2.00,b=0.5"

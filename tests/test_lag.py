"""The client's self-check (client/lag.py): lag histograms, their quantiles and merging across worker
processes, and the client_lag block (which stamp error a run can claim)."""

import asyncio
from array import array

import pytest

from goodbench.client.lag import FOLD_AT, LagHistogram, LagMeter, client_lag, loop_probe


def hist(*lags):
    h = LagHistogram()
    for x in lags:
        h.add(x)
    return h


def test_quantiles_are_bin_upper_edges_never_above_the_maximum():
    h = hist(*([0.0001] * 98), 0.005, 0.2)  # 0.1 ms x 98, 5 ms, 200 ms
    assert h.quantile_ms(0.5) == pytest.approx(0.11)  # the 10 us bin holding 0.1 ms
    assert h.quantile_ms(0.99) == pytest.approx(5.0, abs=0.011)
    assert h.quantile_ms(1.0) == pytest.approx(200.0)  # the 1 ms bin's edge, capped at the maximum
    assert hist(-0.001).quantile_ms(0.5) == 0.0 and LagHistogram().quantile_ms(0.5) is None
    assert hist(5.0).quantile_ms(0.5) == 5000.0  # beyond the last bin: the maximum


def test_states_cross_processes_and_add_up():
    a, b = hist(0.001, 0.001), hist(0.05)
    merged = LagHistogram.from_state(a.state())
    merged.merge(LagHistogram.from_state(b.state()))
    assert merged.n == 3 and merged.max == 0.05 and merged.quantile_ms(0.99) == pytest.approx(50.0)


def state(kernel=0, user=0, merged=(), chunks=1000, cpu=1.0, wall=10.0, loop=(0.001,)):
    m = LagMeter()
    m.read_lags.extend([1e-4] * kernel)  # kernel-stamped reads, as KernelConn notes them
    m.user_reads, m.cpu, m.wall = user, cpu, wall
    for x in merged:
        m.merged.add(x)
    for x in loop:
        m.loop.add(x)
    return m.state(requests=10, chunks=chunks)


def test_client_lag_block():
    cl = client_lag([state(kernel=1000), state(kernel=500, cpu=3.0)])
    assert cl["stamps"] == "kernel" and cl["processes"] == 2 and cl["reads"] == 1500
    assert cl["loop_busy_pct"] == 20.0 and cl["cpu_ms_per_request"] == 200.0  # 4 CPU s over 2 x 10 s, 20 requests
    assert cl["stamp_error_p99_ms"] == 0.0 and cl["merged_chunks"] == 0
    # 5 of 1000 chunks merged (under 1%): p99 over chunks is still exact; 30 of 1000: it is not
    assert client_lag([state(kernel=1000, merged=[0.02] * 5)])["stamp_error_p99_ms"] == 0.0
    worse = client_lag([state(kernel=1000, merged=[0.02] * 30, loop=[0.03] * 10)])
    assert worse["stamp_error_p99_ms"] == pytest.approx(20.0) and worse["stamp_error_p50_ms"] == 0.0
    # ... but never more than the loop was away (a merge needs the loop busy that long)
    prompt = client_lag([state(kernel=1000, merged=[0.5] * 30, loop=[0.002] * 10)])
    assert prompt["stamp_error_p99_ms"] == pytest.approx(2.0, abs=0.011)
    loop = client_lag([state(user=1000, loop=[0.001] * 98 + [0.02, 0.02])])
    assert loop["stamps"] == "user" and loop["stamp_error_p99_ms"] == pytest.approx(20.0)
    assert client_lag([]) is None and client_lag([state(kernel=1), state(user=1)])["stamps"] == "mixed"


def test_the_loop_probe_sees_a_blocked_loop():
    import time

    async def go():
        m = LagMeter()
        m.read_lags.extend([0.002] * FOLD_AT)
        probe = asyncio.ensure_future(loop_probe(m, 0.005))
        await asyncio.sleep(0.02)
        time.sleep(0.05)  # the loop is blocked: the probe wakes ~50 ms late
        await asyncio.sleep(0.02)
        probe.cancel()
        return m

    m = asyncio.run(go())
    assert m.loop.max > 0.03
    assert not m.read_lags and m.reads.n == FOLD_AT  # the raw read lags were binned on the way


def test_binning_many_lags_at_once_matches_one_by_one():
    """add_many is add() vectorised: the same bins, count and maximum, across the fine, coarse and
    overflow ranges and for a negative lag (a clock step)."""
    import random

    rng = random.Random(7)
    lags = [rng.choice([rng.uniform(0, 0.012), rng.uniform(0, 1.5), -0.001]) for _ in range(5000)]
    lags += [0.0, 1e-5, 0.01, 0.999999, 1.0, 1.001, 5.0]
    one, many = LagHistogram(), LagHistogram()
    for x in lags:
        one.add(x)
    many.add_many(array("d", lags[:2000]))
    many.add_many(array("d", lags[2000:]))
    assert list(many.bins) == list(one.bins) and many.n == one.n and many.max == one.max

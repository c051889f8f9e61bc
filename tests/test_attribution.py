"""Attributing requests to replicas by the workers' counters (metrics/attribution.py): synthetic fleets whose
truth is known, sampled as `--worker-metrics` samples them, with the timing noise a real scrape has."""

from dataclasses import replace

import numpy as np
import pytest

from goodbench.metrics.attribution import HOW, Counters, attribute, worker_counters


def _fleet(n_req=400, workers=2, rate=40.0, every=0.2, seed=0, same_size=False, sums=True, slow=0.0):
    """Requests finishing on `workers` replicas at `rate` per second; each replica's counters sampled every
    `every` s with up to 20 ms of jitter; the client sees each end 0-15 ms after the server counted it. slow:
    each read of /metrics is answered this long (up to 40 % less) after it was sent: a busy worker's handler runs
    late and shows its counters as they are then, at the read's end."""
    rng = np.random.default_rng(seed)
    server_end = np.sort(rng.uniform(0, n_req / rate, n_req))
    fin = server_end + rng.uniform(0, 0.015, n_req)
    truth = rng.integers(0, workers, n_req)
    prompt = np.full(n_req, 100) if same_size else rng.integers(20, 3000, n_req)
    output = np.full(n_req, 50) if same_size else rng.integers(1, 500, n_req)
    counters = []
    for w in range(workers):
        t = np.arange(-every, server_end[-1] + 2 * every, every) + rng.uniform(-0.02, 0.02)
        mine = truth == w
        at = [server_end[mine] <= x for x in t]
        before, after = (
            rng.uniform(0.6 * slow, slow + 1e-9, t.size),
            rng.uniform(0, 0.005, t.size),
        )  # [t - before, t + after]
        counters.append(
            Counters(
                t + (after - before) / 2,  # as recorded: the read's middle, not the moment it shows
                np.array([m.sum() for m in at]),
                np.array([prompt[mine][m].sum() for m in at]) if sums else None,
                np.array([output[mine][m].sum() for m in at]) if sums else None,
                (after + before) / 2,
            )
        )
    return fin, prompt, output, truth, counters


def test_distinct_requests_are_attributed_exactly():
    fin, prompt, output, truth, counters = _fleet()
    got = attribute(fin, prompt, output, np.ones(fin.size, bool), counters)
    assert (got.replica >= 0).all() and got.unmatched == 0
    exact = got.how == HOW.index("exact")
    assert exact.mean() >= 0.95  # a few intervals hold two equal-sum choices by chance
    assert (got.replica[exact] == truth[exact]).mean() >= 0.99
    assert (got.replica == truth).mean() >= 0.97


def test_a_worker_answering_its_metrics_late_is_attributed_within_the_read():
    # reads answered 0.9-1.5 s late (a loaded host): the middle of a read is up to 0.75 s before the moment its
    # counters show, past every window; the read's span bounds it
    fin, prompt, output, truth, counters = _fleet(rate=10, every=0.2, slow=1.5, seed=5)
    got = attribute(fin, prompt, output, np.ones(fin.size, bool), counters)
    assert (got.replica >= 0).all() and got.unmatched == 0
    exact = got.how == HOW.index("exact")
    assert (got.replica[exact] == truth[exact]).all() and exact.mean() >= 0.5
    blind = attribute(fin, prompt, output, np.ones(fin.size, bool), [replace(c, half=None) for c in counters])
    assert blind.unmatched > 0  # the read's middle alone misses some: what the span is for


def test_same_sized_requests_are_said_to_be_ambiguous():
    fin, prompt, output, truth, counters = _fleet(same_size=True)
    got = attribute(fin, prompt, output, np.ones(fin.size, bool), counters)
    assert (got.replica >= 0).all()
    # per replica the counts are right whatever the choice; which request was which is not known
    assert np.bincount(got.replica, minlength=2).tolist() == np.bincount(truth, minlength=2).tolist()
    wrong = got.replica != truth
    assert wrong.any() and (got.how[wrong] != HOW.index("exact")).all()  # never wrong and called exact


def test_counters_without_token_sums_attribute_by_timing_alone():
    fin, prompt, output, truth, counters = _fleet(sums=False)
    got = attribute(fin, prompt, output, np.ones(fin.size, bool), counters)
    assert (got.how == HOW.index("timing")).all()
    assert np.bincount(got.replica, minlength=2).tolist() == np.bincount(truth, minlength=2).tolist()


def test_failed_requests_and_other_clients_traffic_are_left_out():
    fin, prompt, output, truth, counters = _fleet(n_req=200)
    ok = np.ones(fin.size, bool)
    ok[::10] = False  # these never reached a worker's success counter: the workers count them anyway here
    got = attribute(fin, prompt, output, ok, counters)
    assert (got.replica[~ok] == -1).all() and (got.how[~ok] == -1).all()
    assert got.unmatched > 0  # the workers finished requests this run did not see end
    assert got.stats(ok)["unattributed"] <= 0.1 * ok.sum()


def test_worker_rows_as_sampled_become_counters():
    rows = [
        {"t": -0.1, "source": 0, "metrics": {"vllm:request_success_total": 0.0}},
        {"t": -0.1, "source": 1, "metrics": {"vllm:request_success_total": 3.0}},
        {"t": 0.1, "source": 0, "metrics": {"vllm:request_success_total": 2.0}},
        {"t": 0.1, "source": 1, "metrics": {}},  # a sample without the counter: skipped
    ]
    c0, c1 = worker_counters(rows, 2)
    assert c0.t.tolist() == [-0.1, 0.1] and c0.done.tolist() == [0, 2] and c0.prompt is None
    assert c0.half.tolist() == [0.0, 0.0]  # rows without "dt": instant reads
    assert c1.done.tolist() == [3]


@pytest.mark.parametrize("rate,every,share", [(10, 0.5, 0.95), (40, 0.2, 0.95), (100, 0.1, 0.75)])
def test_up_to_ten_ends_per_sample_most_are_exact(rate, every, share):
    fin, prompt, output, truth, counters = _fleet(rate=rate, every=every, seed=3)
    got = attribute(fin, prompt, output, np.ones(fin.size, bool), counters)
    exact = got.how == HOW.index("exact")
    assert (got.replica[exact] == truth[exact]).all() and exact.mean() >= share


def test_denser_ends_are_called_unsure_not_guessed_as_exact():
    fin, prompt, output, truth, counters = _fleet(rate=100, every=0.5, seed=3)  # 50 ends between two samples
    got = attribute(fin, prompt, output, np.ones(fin.size, bool), counters)
    exact = got.how == HOW.index("exact")
    assert (got.replica[exact] == truth[exact]).all() and exact.mean() < 0.5
    assert np.bincount(got.replica, minlength=2).tolist() == np.bincount(truth, minlength=2).tolist()

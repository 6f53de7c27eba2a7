"""Probe grids trained at once and selected on validation (repeval_ref.torch.grid)."""

import numpy as np
import pytest
import torch

from repeval_ref.torch.grid import grid_accuracies, probe_grid_search, train_probe_grid
from repeval_ref.torch.probe import train_probe

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _views(n, informative, rng, signal=3.0, d=4):
    y = rng.integers(0, 2, n)
    out = {}
    for name in ("a", "b"):
        h = rng.normal(size=(n, d))
        if name == informative:
            h[:, 0] += signal * (2 * y - 1)
        out[name] = h.astype(np.float32)
    return out, y


def test_grid_heads_equal_probes_trained_alone():
    rng = np.random.default_rng(0)
    views, y = _views(90, "a", rng)
    views["c"] = np.concatenate([views["a"], views["b"]], axis=1)
    lrs = [0.01, 0.3]
    heads, configs = train_probe_grid(views, y, 2, lrs, epochs=3, batch_size=16, seed=5)
    assert len(heads) == 6 and [c["view"] for c in configs] == ["a", "a", "b", "b", "c", "c"]
    for head, c in zip(heads, configs):
        alone = train_probe(views[c["view"]], y, 2, epochs=3, lr=c["lr"], batch_size=16, seed=5)
        for (k, p1), p2 in zip(head.state_dict().items(), alone.state_dict().values()):
            torch.testing.assert_close(p1, p2, rtol=1e-5, atol=1e-6, msg=k)
    acc = grid_accuracies(heads, configs, views, y)
    assert acc.shape == (6,) and acc[1] > 0.85 and acc[3] < 0.75, acc


def test_selection_uses_validation_not_test():
    rng = np.random.default_rng(1)
    # View "a" carries the label on the training distribution, view "b" only on the test
    # distribution: the test-best configuration is a "b" head, the validation-best an "a" head.
    train, y = _views(240, "a", rng)
    test, y_test = _views(200, "b", rng)
    res = probe_grid_search(train, y, test, y_test, 2, [0.01, 0.1], epochs=5, batch_size=32, seed=0)
    assert len(res.configs) == 4
    test_best = res.configs[int(np.argmax(res.test_acc))]
    assert test_best["view"] == "b"
    assert res.chosen["view"] == "a"
    assert res.best == int(np.argmax(res.val_acc))
    assert res.chosen_val_acc > 0.85 and res.chosen_test_acc < 0.7 < res.test_acc.max()
    assert res.chosen_test_acc == res.test_acc[res.best]
    assert "val acc" in res.report() and "test acc" in res.report()
    # Changing the test labels changes nothing about the choice.
    res2 = probe_grid_search(
        train, y, test, 1 - y_test, 2, [0.01, 0.1], epochs=5, batch_size=32, seed=0
    )
    assert res2.best == res.best
    np.testing.assert_array_equal(res2.val_acc, res.val_acc)


def test_refit_trains_on_the_whole_training_set():
    rng = np.random.default_rng(2)
    train, y = _views(120, "a", rng)
    test, y_test = _views(80, "a", rng)
    res = probe_grid_search(train, y, test, y_test, 2, [0.1], epochs=4, batch_size=32, refit=True)
    alone = train_probe(train["a"], y, 2, epochs=4, lr=0.1, batch_size=32, seed=0)
    with torch.no_grad():
        acc = float((alone(torch.from_numpy(test["a"])).argmax(1).numpy() == y_test).mean())
    assert res.chosen["view"] == "a" and res.chosen_test_acc == pytest.approx(acc)


def test_bad_inputs():
    rng = np.random.default_rng(3)
    views, y = _views(40, "a", rng)
    with pytest.raises(TypeError):
        train_probe_grid({}, y, 2, [0.1])
    with pytest.raises(ValueError):
        train_probe_grid(views, y[:5], 2, [0.1])
    with pytest.raises(ValueError):
        train_probe_grid(views, y, 2, [])
    with pytest.raises(ValueError):
        train_probe_grid(views, y, 2, [0.1, -1.0])
    with pytest.raises(ValueError):
        train_probe_grid({"a": views["a"], "b": views["b"][:20]}, y, 2, [0.1])
    with pytest.raises(ValueError):
        probe_grid_search(views, y, {"a": views["a"]}, y, 2, [0.1])
    with pytest.raises(ValueError):
        probe_grid_search(views, y, views, y, 2, [0.1], val_fraction=1.5)


@pytest.mark.parametrize(
    "kw",
    [
        dict(weight_decay=1e-2, momentum=0.0),
        dict(batchnorm=False, momentum=0.5),
        dict(weight_decay=1e-3, batch_size=7),
    ],
)
def test_stacked_heads_follow_sgd_of_a_lone_probe(kw):
    """Weight decay on weight and bias, no momentum, no BatchNorm, a last batch of one sample."""
    rng = np.random.default_rng(7)
    views, y = _views(50, "a", rng, d=5)
    y = rng.integers(0, 3, 50)
    lrs = [0.02, 0.2, 1.0]
    kw = {"epochs": 4, "batch_size": 8, **kw}
    heads, configs = train_probe_grid(views, y, 3, lrs, seed=11, **kw)
    for head, c in zip(heads, configs):
        alone = train_probe(views[c["view"]], y, 3, lr=c["lr"], seed=11, **kw)
        assert set(head.state_dict()) == set(alone.state_dict())
        for k, p in alone.state_dict().items():
            torch.testing.assert_close(head.state_dict()[k], p, rtol=1e-5, atol=1e-6, msg=k)


def test_lrs_must_be_numbers_not_a_string():
    rng = np.random.default_rng(4)
    views, y = _views(40, "a", rng)
    with pytest.raises(
        TypeError, match="lrs must be a number or a sequence of numbers, got the string '0.1'"
    ):
        train_probe_grid(views, y, 2, "0.1")
    with pytest.raises(TypeError, match=r"lrs\[1\]"):
        train_probe_grid(views, y, 2, [0.1, "1"])
    with pytest.raises(TypeError, match="lrs"):
        train_probe_grid(views, y, 2, {0.1})
    with pytest.raises(TypeError, match="lrs"):
        probe_grid_search(views, y, views, y, 2, "0.1 0.3")
    heads, configs = train_probe_grid(
        views, y, 2, np.float64(0.1), epochs=1
    )  # one number: one rate
    assert [c["lr"] for c in configs] == [0.1, 0.1]
    heads, configs = train_probe_grid(views, y, 2, np.array([0.1, 0.3]), epochs=1)
    assert [c["lr"] for c in configs] == [0.1, 0.3, 0.1, 0.3]


def test_grid_accuracies_restores_training_flags():
    rng = np.random.default_rng(5)
    views, y = _views(60, "a", rng)
    heads, configs = train_probe_grid(views, y, 2, [0.1, 1.0], epochs=2, batch_size=16)
    expected = grid_accuracies(heads, configs, views, y)  # heads come back in eval mode
    heads.train()
    heads[1].bn.eval()  # mixed flags, as a caller may have left them
    flags = [m.training for m in heads.modules()]
    acc = grid_accuracies(heads, configs, views, y)
    assert [m.training for m in heads.modules()] == flags
    np.testing.assert_array_equal(acc, expected)  # evaluated in eval mode all the same
    assert not torch.equal(heads[0].bn.running_mean, torch.zeros(4))  # trained statistics in use


def test_chosen_val_acc_is_that_of_the_head_chosen_before_the_refit():
    rng = np.random.default_rng(6)
    train, y = _views(120, "a", rng, signal=1.0)
    test, y_test = _views(80, "a", rng, signal=1.0)
    kw = dict(epochs=3, batch_size=32, seed=0)
    plain = probe_grid_search(train, y, test, y_test, 2, [0.03, 0.3], **kw)
    refit = probe_grid_search(train, y, test, y_test, 2, [0.03, 0.3], refit=True, **kw)
    assert refit.best == plain.best
    assert refit.chosen_val_acc == plain.chosen_val_acc == refit.val_acc[refit.best]

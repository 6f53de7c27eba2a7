"""Choosing a fine-tuning run on validation images (repeval_ref.torch.tuning, book/lpft.md).

What is checked against independent computations:

* ``select_on_validation`` returns the first maximum in row-major order, compared with a
  brute-force scan over tables with many ties, and is unchanged by a strictly increasing
  transform of the scores;
* ``carve_validation`` gives disjoint, in-range, seeded sets of the stated sizes;
* ``train_with_validation``: the state it restores is bit for bit the state of a fresh run
  stopped at the chosen step, whose accuracy (computed here with NumPy) is the recorded
  best; the chosen step is the earliest maximum of the curve; the validation images never
  change the weights; images outside ``fit`` and ``val`` are never read; a part of the
  model left in evaluation mode stays so during training.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import repeval_ref as R
from repeval_ref.torch.freeze import state_unchanged
from repeval_ref.torch.tuning import carve_validation, select_on_validation, train_with_validation

# ------------------------------------------------------------------------ select_on_validation


def _brute_force_first_max(table):
    table = np.atleast_2d(table)
    best, where = -np.inf, None
    for i in range(table.shape[0]):
        for j in range(table.shape[1]):
            if table[i, j] > best:
                best, where = table[i, j], (i, j)
    return where


@pytest.mark.parametrize("seed", range(20))
def test_selection_is_the_first_maximum_in_row_major_order(seed):
    rng = np.random.default_rng(seed)
    shape = tuple(rng.integers(1, 6, size=2))
    table = rng.integers(0, 3, size=shape) / 600  # few values: ties are common
    assert select_on_validation(table) == _brute_force_first_max(table)
    row = table[0]
    assert select_on_validation(row) == (_brute_force_first_max(row)[1],)


def test_ties_go_to_the_first_setting_then_the_fewest_steps():
    table = np.array([[0.5, 0.7, 0.7], [0.7, 0.6, 0.7]])
    assert select_on_validation(table) == (0, 1)
    assert select_on_validation(table[::-1]) == (0, 0)


def test_selection_unchanged_by_an_increasing_transform():
    rng = np.random.default_rng(3)
    table = rng.uniform(0.1, 0.9, size=(4, 7))
    assert select_on_validation(table) == select_on_validation(np.log(table) * 3 + 1)


def test_top_level_names_are_the_module_functions():
    assert R.select_on_validation is select_on_validation
    assert R.carve_validation is carve_validation
    assert R.train_with_validation is train_with_validation


@pytest.mark.parametrize(
    "bad", [[], [[]], np.zeros((2, 2, 2)), [0.5, np.nan], [np.inf, 0.1], 0.5, "abc"]
)
def test_selection_rejects_bad_scores(bad):
    with pytest.raises(ValueError, match="scores"):
        select_on_validation(bad)


# ------------------------------------------------------------------------------- carve_validation


@pytest.mark.parametrize(("n", "n_fit", "n_val"), [(10, 7, 3), (100, 20, 30), (2, 1, 1)])
def test_carved_sets_are_disjoint_seeded_and_sized(n, n_fit, n_val):
    fit, val = carve_validation(n, n_fit, n_val, seed=4)
    assert fit.shape == (n_fit,) and val.shape == (n_val,)
    both = np.concatenate([fit, val])
    assert np.unique(both).size == n_fit + n_val
    assert both.min() >= 0 and both.max() < n
    again = carve_validation(n, n_fit, n_val, seed=4)
    np.testing.assert_array_equal(fit, again[0])
    np.testing.assert_array_equal(val, again[1])


def test_carving_depends_on_the_seed():
    a = carve_validation(1000, 100, 100, seed=0)
    b = carve_validation(1000, 100, 100, seed=1)
    assert not np.array_equal(a[1], b[1])


@pytest.mark.parametrize(
    ("args", "name"),
    [((10, 8, 3), "n_fit"), ((10, 0, 3), "n_fit"), ((10, 3, 0), "n_val"), ((1, 1, 1), "n_pool")],
)
def test_carving_rejects_bad_sizes(args, name):
    with pytest.raises(ValueError, match=name):
        carve_validation(*args)


# -------------------------------------------------------------------------- train_with_validation

N, D, K = 120, 6, 3


def _problem(seed=0):
    """Gaussian classes in D dimensions: images (N, D) float32, labels (N,)."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, K, size=N)
    centres = rng.normal(size=(K, D)) * 1.2
    images = centres[labels] + rng.normal(size=(N, D))
    return torch.as_tensor(images, dtype=torch.float32), labels


def _model(seed=0, batchnorm=False):
    torch.manual_seed(seed)
    layers = [nn.BatchNorm1d(D)] if batchnorm else []
    return nn.Sequential(*layers, nn.Linear(D, 8), nn.Tanh(), nn.Linear(8, K))


def _run(images, labels, fit, val, steps, seed=0, **kw):
    model = _model(seed, batchnorm=kw.pop("batchnorm", False))
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.3)
    curve = train_with_validation(
        model, opt, images, labels, fit, val, steps=steps, batch_size=8, seed=seed, **kw
    )
    return model, curve


def _numpy_accuracy(model, images, labels, idx):
    model.eval()
    with torch.no_grad():
        logits = model(images[torch.as_tensor(idx)]).numpy()
    return float(np.mean(logits.argmax(1) == labels[idx]))


FIT, VAL = np.arange(0, 60), np.arange(60, 100)


def _by_hand(images, labels, fit, steps, seed=0):
    """The training the docstring describes, written out: SGD on seeded draws with replacement."""
    model = _model(seed)
    opt = torch.optim.SGD(model.parameters(), lr=0.3)
    gen = torch.Generator().manual_seed(seed)
    y = torch.as_tensor(labels)
    for _ in range(steps):
        pick = torch.as_tensor(fit)[torch.randint(0, len(fit), (8,), generator=gen)]
        loss = nn.functional.cross_entropy(model(images[pick]), y[pick])
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model


def test_curve_and_restored_state_match_training_written_out_by_hand():
    images, labels = _problem()
    model, curve = _run(images, labels, FIT, VAL, steps=60, eval_every=5)
    np.testing.assert_array_equal(curve.steps, np.r_[0:61:5])
    for step, acc in zip(curve.steps, curve.accuracy):
        assert _numpy_accuracy(_by_hand(images, labels, FIT, int(step)), images, labels, VAL) == acc
    # the chosen checkpoint is the earliest maximum, and the model holds its state
    assert curve.best_index == select_on_validation(curve.accuracy)[0]
    assert curve.best_step == curve.steps[curve.best_index]
    assert curve.best_accuracy == curve.accuracy.max()
    assert 0 < curve.best_step  # the problem is learnable: training helped
    assert state_unchanged(model, curve.state)
    assert state_unchanged(_by_hand(images, labels, FIT, curve.best_step), curve.state)
    assert _numpy_accuracy(model, images, labels, VAL) == curve.best_accuracy


def test_last_step_is_a_checkpoint_when_not_a_multiple():
    images, labels = _problem()
    _, curve = _run(images, labels, FIT, VAL, steps=12, eval_every=5)
    np.testing.assert_array_equal(curve.steps, [0, 5, 10, 12])


def test_the_validation_images_never_change_the_weights():
    images, labels = _problem()
    other = images.clone()
    torch.manual_seed(5)
    other[VAL] = torch.randn(VAL.size, D)  # different validation content, same fit images
    chosen = []
    for pool in (images, other):
        _, curve = _run(pool, labels, FIT, VAL, steps=40, eval_every=4)
        # whatever step the run chose, its state is that of plain training for that many steps
        assert state_unchanged(_by_hand(images, labels, FIT, curve.best_step), curve.state)
        chosen.append(curve.best_step)
    assert chosen[0] != chosen[1]  # the two validation sets did choose differently


def test_images_outside_fit_and_val_are_never_read():
    images, labels = _problem()
    poisoned = images.clone()
    poisoned[100:] = float("nan")  # a "test split" sitting in the same array
    _, clean = _run(images, labels, FIT, VAL, steps=30, eval_every=3)
    _, curve = _run(poisoned, labels, FIT, VAL, steps=30, eval_every=3)
    np.testing.assert_array_equal(curve.accuracy, clean.accuracy)
    assert all(torch.isfinite(t).all() for t in curve.state.values() if t.is_floating_point())


def test_same_seed_same_run_and_another_seed_another_run():
    images, labels = _problem()
    m1, a = _run(images, labels, FIT, VAL, steps=30, eval_every=3)
    m2, b = _run(images, labels, FIT, VAL, steps=30, eval_every=3)
    np.testing.assert_array_equal(a.accuracy, b.accuracy)
    assert state_unchanged(m2, a.state)
    model = _model(0)
    opt = torch.optim.SGD(model.parameters(), lr=0.3)
    c = train_with_validation(
        model, opt, images, labels, FIT, VAL, steps=30, eval_every=1, batch_size=8, seed=1
    )
    _, d = _run(images, labels, FIT, VAL, steps=30, eval_every=1)
    assert not np.array_equal(c.accuracy, d.accuracy)


def test_a_part_left_in_evaluation_mode_stays_so():
    images, labels = _problem()
    model = _model(0, batchnorm=True)
    model.train()
    model[0].eval()  # a frozen BatchNorm: its statistics must not move
    model[0].requires_grad_(False)
    stats = model[0].running_mean.clone()
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.3)
    train_with_validation(
        model, opt, images, labels, FIT, VAL, steps=20, eval_every=5, batch_size=8
    )
    assert torch.equal(model[0].running_mean, stats)
    assert model.training and not model[0].training and model[1].training
    # a BatchNorm left in training mode does update its statistics
    model = _model(0, batchnorm=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.3)
    curve = train_with_validation(
        model, opt, images, labels, FIT, VAL, steps=20, eval_every=20, batch_size=8
    )
    assert curve.best_step == 20
    assert not torch.equal(model[0].running_mean, stats)


def test_zero_steps_scores_the_start_and_keeps_it():
    images, labels = _problem()
    model = _model(0)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    opt = torch.optim.SGD(model.parameters(), lr=0.3)
    curve = train_with_validation(model, opt, images, labels, FIT, VAL, steps=0, eval_every=5)
    np.testing.assert_array_equal(curve.steps, [0])
    assert state_unchanged(model, before)
    assert curve.best_accuracy == _numpy_accuracy(model, images, labels, VAL)


@pytest.mark.parametrize(
    ("change", "name"),
    [
        (dict(val=np.arange(50, 90)), "val"),  # overlaps fit
        (dict(val=np.array([60, 61, 61])), "val"),  # repeats an index
        (dict(fit=np.array([0, 1, 500])), "fit"),  # out of range
        (dict(fit=np.array([], dtype=int)), "fit"),
        (dict(fit=np.array([0.0, 1.0])), "fit"),
        (dict(labels=np.zeros(N - 1, dtype=int)), "labels"),
        (dict(labels=np.zeros(N)), "labels"),  # float labels
        (dict(steps=-1), "steps"),
        (dict(eval_every=0), "eval_every"),
        (dict(batch_size=0), "batch_size"),
        (dict(loss="mse"), "loss"),
    ],
)
def test_bad_input_is_rejected_naming_the_argument(change, name):
    images, labels = _problem()
    model = _model(0)
    kw = dict(
        model=model,
        optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
        images=images,
        labels=labels,
        fit=FIT,
        val=VAL,
        steps=5,
        eval_every=1,
    )
    kw.update(change)
    with pytest.raises(ValueError, match=name):
        train_with_validation(**kw)


def test_wrong_types_are_rejected():
    images, labels = _problem()
    model = _model(0)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(TypeError, match="model"):
        train_with_validation("m", opt, images, labels, FIT, VAL, steps=1, eval_every=1)
    with pytest.raises(TypeError, match="optimizer"):
        train_with_validation(model, "adam", images, labels, FIT, VAL, steps=1, eval_every=1)
    with pytest.raises(TypeError, match="images"):
        train_with_validation(model, opt, images.numpy(), labels, FIT, VAL, steps=1, eval_every=1)

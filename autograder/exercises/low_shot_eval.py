"""Exercise spec: low-shot evaluation by nearest class mean over random supports (book/noise.md;
seed 000)."""

NAME = "low_shot_eval"
TITLE = "Low-shot evaluation with honest error bars"
LEVEL = "core"
ASSIGNMENT = "noise"
CHAPTER = "noise"

STATEMENT = r"""
With only a handful of labelled images per class, *which* images get labelled (the
support set) moves the accuracy a lot. An honest low-shot number therefore averages over
several random supports and reports how much it varies from one support to the next.
The classifier is the simplest there is, the nearest class mean. Write

```python
low_shot_eval(train_h, train_y,          # labelled pool
              test_h, test_y,            # evaluation set
              n_per_class, n_draws, rng)
```

**Inputs.** A labelled pool `train_h` of shape `(n_train, d)` with integer labels
`train_y` (non-negative, not necessarily `0 .. K-1`), test features `test_h` of shape
`(n_test, d)` with labels `test_y`, the number of support images per class
`n_per_class`, the number of draws `n_draws >= 2`, and a NumPy `Generator` `rng`.

**The procedure.**

1. Scale every row of `train_h` and `test_h` to unit Euclidean length.
2. Repeat `n_draws` times:
   * for each class `c` of `np.unique(train_y)`, **in increasing order**, draw its support
     with exactly one call
     `rng.choice(np.flatnonzero(train_y == label), size=n_per_class, replace=False)`
     (here `label` is the class `c`);
   * average the unit features of each class's support and rescale each average to unit
     length;
   * give each test image the class whose (unit) mean has the largest dot product with
     it, and record the fraction of test images classified correctly.
3. Return `(mean, std)` of the `n_draws` accuracies as two Python floats, where `std` is
   the **sample** standard deviation, `np.std(accuracies, ddof=1)`.

**Random calls.** Those `n_draws` × (number of classes) calls of `rng.choice` are the only
use of `rng`: no shuffle, no permutation, no other generator. Then anyone with the same
`rng` gets exactly your supports and your numbers, and the hidden tests compare with the
reference to the last digit.

**Why `ddof=1` and not the standard error.** The standard deviation over draws says how
far one evaluation with one draw may land from another. The standard error of the mean,
smaller by $\sqrt{n_\text{draws}}$, answers a different question (how well the average is
known). Do not modify the inputs.
"""

SOLUTION = r'''import numpy as np

# Nearest class mean on unit features, averaged over random support sets.


def low_shot_eval(train_h, train_y,       # labelled pool
                  test_h, test_y,         # evaluation set
                  n_per_class, n_draws, rng):
    """Mean and sample std (ddof=1) of nearest-class-mean accuracy over support draws."""
    ### BEGIN SOLUTION
    pool = np.asarray(train_h, dtype=float)
    pool = pool / np.linalg.norm(pool, axis=1, keepdims=True)
    queries = np.asarray(test_h, dtype=float)
    queries = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    pool_y = np.asarray(train_y)
    truth = np.asarray(test_y)
    classes = np.unique(pool_y)                     # increasing order
    members = [np.flatnonzero(pool_y == c) for c in classes]

    accuracies = []
    for _ in range(n_draws):
        centres = np.stack([
            pool[rng.choice(idx, size=n_per_class, replace=False)].mean(axis=0)
            for idx in members
        ])
        centres = centres / np.linalg.norm(centres, axis=1, keepdims=True)
        predicted = classes[np.argmax(queries @ centres.T, axis=1)]
        accuracies.append(np.mean(predicted == truth))
    accuracies = np.array(accuracies)
    return float(accuracies.mean()), float(accuracies.std(ddof=1))
    ### END SOLUTION
'''

VISIBLE_TESTS = r"""import numpy as np

# Two well separated classes: every support gives a perfect classifier.
rng = np.random.default_rng(0)
train_h = np.vstack([[5.0, 0.0] + rng.normal(size=(6, 2)) * 0.1,
                     [0.0, 5.0] + rng.normal(size=(6, 2)) * 0.1])
train_y = np.repeat([0, 1], 6)
test_h = np.array([[1.0, 0.1], [0.2, 2.0], [3.0, -0.2]])
test_y = np.array([0, 1, 0])

mean, std = low_shot_eval(train_h, train_y, test_h, test_y, 2, 5, np.random.default_rng(1))
assert isinstance(mean, float) and isinstance(std, float), "return two Python floats"
assert mean == 1.0 and std == 0.0, f"separated classes: expected (1.0, 0.0), got {(mean, std)}"

# the generator is used by exactly n_draws * n_classes calls of rng.choice
g = np.random.default_rng(7)
low_shot_eval(train_h, train_y, test_h, test_y, 2, 3, g)
h = np.random.default_rng(7)
for _ in range(3):
    for c in (0, 1):
        h.choice(np.flatnonzero(train_y == c), size=2, replace=False)
assert g.bit_generator.state == h.bit_generator.state, \
    "use rng only through one rng.choice(..., replace=False) per class per draw"
print("visible tests passed")
"""
VISIBLE_POINTS = 2

HIDDEN = [
    "low_shot_eval/matches_reference",
    "low_shot_eval/ddof",
    "low_shot_eval/random_calls",
    "low_shot_eval/labels_not_contiguous",
    "low_shot_eval/properties",
]

"""Exercise spec: a linear probe tuned without looking at the test set (book/protocols.md)."""

NAME = "linear_probe_done_right"
TITLE = "A linear probe done right"
LEVEL = "core"
ASSIGNMENT = "protocols"
CHAPTER = "protocols"

STATEMENT = r"""
A probe has a hyperparameter, the inverse regularisation strength `C` of scikit-learn's
`LogisticRegression` (small `C`, strong weight decay). Picking `C` by its accuracy on the
images you then report on inflates the number. Write the honest procedure:

```python
linear_probe_done_right(train_h: np.ndarray, train_y: np.ndarray, test_h: np.ndarray,
                        test_y: np.ndarray, Cs: list, seed: int = 0) -> tuple
```

which returns the pair `(best_C, test_accuracy)` as two Python floats.

1. **Hold out a validation split from the training set.** With `n = len(train_h)` and
   `perm = np.random.default_rng(seed).permutation(n)`, the rows `perm[:n // 5]` validate
   and the remaining rows `perm[n // 5:]` are used for fitting. No other random numbers.
2. **Standardise with the fitting rows' statistics.** Compute the per-feature mean and
   standard deviation (`ddof=0`) of the fitting rows only, and apply them to both the
   fitting and the validation rows.
3. **Choose C.** For each `C` in `Cs`, in the order given, fit
   `LogisticRegression(C=C, max_iter=2000)` on the fitting rows and measure its accuracy on
   the validation rows. Keep the earliest `C` that reaches the highest validation accuracy.
4. **Refit and test once.** Standardise the whole training set with its own mean and
   standard deviation (`ddof=0`), fit `LogisticRegression(C=best_C, max_iter=2000)` on it,
   transform the test features **with those same training statistics**, and return the
   accuracy on the test set.

The test set must play no part in choosing `C`, and its statistics no part in
transforming it: a deployed probe only knows its training data. The features in the
hidden tests have coordinates on wildly different scales and a test set from a slightly
shifted "camera", so each shortcut changes the answer. Do not modify the inputs.
"""

SOLUTION = r'''import numpy as np
from sklearn.linear_model import LogisticRegression

# Honest recipe: C is chosen on held-out training rows, the test set is scored once.


def linear_probe_done_right(train_h: np.ndarray, train_y: np.ndarray, test_h: np.ndarray,
                            test_y: np.ndarray, Cs: list, seed: int = 0) -> tuple:
    """Pick C on a validation split carved from the training set, refit, test once.

    Returns (best_C, test_accuracy) as Python floats.
    """
    ### BEGIN SOLUTION
    X = np.asarray(train_h, dtype=float)
    y = np.asarray(train_y)
    X_test = np.asarray(test_h, dtype=float)
    y_test = np.asarray(test_y)
    n = len(X)
    order = np.random.default_rng(seed).permutation(n)
    held_out, fitting = order[: n // 5], order[n // 5:]

    centre, spread = X[fitting].mean(axis=0), X[fitting].std(axis=0)
    Z_fit = (X[fitting] - centre) / spread
    Z_val = (X[held_out] - centre) / spread

    scores = []
    for C in Cs:
        model = LogisticRegression(C=C, max_iter=2000).fit(Z_fit, y[fitting])
        scores.append(model.score(Z_val, y[held_out]))
    best_C = Cs[int(np.argmax(scores))]        # argmax keeps the earliest of equal scores

    centre, spread = X.mean(axis=0), X.std(axis=0)
    model = LogisticRegression(C=best_C, max_iter=2000).fit((X - centre) / spread, y)
    accuracy = model.score((X_test - centre) / spread, y_test)
    return float(best_C), float(accuracy)
    ### END SOLUTION
'''

VISIBLE_TESTS = r"""import numpy as np

rng = np.random.default_rng(0)
centres = np.array([[2.0, 0.0, 0.0], [-2.0, 0.0, 0.0]])
y_tr = rng.integers(0, 2, size=60)
y_te = rng.integers(0, 2, size=40)
h_tr = (centres[y_tr] + rng.normal(size=(60, 3))) * [1.0, 100.0, 0.01]
h_te = (centres[y_te] + rng.normal(size=(40, 3))) * [1.0, 100.0, 0.01]

result = linear_probe_done_right(h_tr, y_tr, h_te, y_te, [0.01, 1.0])
assert isinstance(result, tuple) and len(result) == 2, "return the pair (best_C, test_accuracy)"
best_C, acc = result
assert best_C in (0.01, 1.0), "best_C must be one of the candidates"
assert 0.8 <= acc <= 1.0, f"two well separated classes should give a high accuracy, got {acc}"
assert result == linear_probe_done_right(h_tr, y_tr, h_te, y_te, [0.01, 1.0]), \
    "the same inputs must give the same answer (use only default_rng(seed))"
print("visible tests passed")
"""
VISIBLE_POINTS = 2

HIDDEN = [
    "linear_probe_done_right/recipe",
    "linear_probe_done_right/selection_ignores_test_set",
    "linear_probe_done_right/test_uses_training_statistics",
    "linear_probe_done_right/properties",
    "linear_probe_done_right/ties_to_earliest",
]

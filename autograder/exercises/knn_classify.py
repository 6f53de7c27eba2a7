"""Exercise spec: the weighted k-NN classifier (book/knn.md; seed 000, warm-up)."""

NAME = "knn_classify"
TITLE = "Weighted k-NN classifier"
LEVEL = "warm-up"
ASSIGNMENT = "knn"
CHAPTER = "knn"

STATEMENT = r"""
The k-NN protocol trains nothing: every stored training feature votes for its own label,
and more similar features get exponentially heavier votes. Write

```python
knn_classify(train_h: np.ndarray, train_y: np.ndarray, test_h: np.ndarray,
             k: int, tau: float, n_classes: int) -> np.ndarray
```

**Inputs.** `train_h` of shape `(n_train, d)` (the feature bank), integer labels `train_y`
of shape `(n_train,)` in `0 .. n_classes - 1`, queries `test_h` of shape `(n_test, d)`, the
number of neighbours `k >= 1`, a temperature `tau > 0`, and `n_classes`.

**What to compute, for each query.**

1. Divide every row of both `train_h` and `test_h` by its Euclidean length, so that one
   matrix product gives all cosine similarities $s_i$ between the query and the bank.
2. Keep the `k` largest similarities of the row. When several stored features share the
   similarity at the `k`-th place, keep the ones with the smaller index (the rule of
   `repeval_ref.knn_classify`): a stable sort, `np.argsort(-sims, axis=1,
   kind="stable")[:, :k]`, does exactly that, whereas `np.argpartition` picks arbitrarily
   among equal values. When `k` is larger than `n_train`, every stored feature is a
   neighbour.
3. Each kept neighbour adds $e^{s_i/\tau}$ to the total of its class. Predict the class
   with the largest total; when two totals are exactly equal, predict the smaller label.

**Return** an integer NumPy array of shape `(n_test,)`. Do not modify the inputs.

**The trap.** With $\tau = 10^{-3}$ a similarity of 0.9 gives $e^{900}$, far above the
largest float. Dividing a row's votes by the vote of its most similar neighbour changes no
argmax, and makes every exponent $\le 0$.

The data sets here are small: one similarity matrix for the whole test set is fine.
"""

SOLUTION = r'''import numpy as np


def knn_classify(train_h: np.ndarray, train_y: np.ndarray, test_h: np.ndarray,
                 k: int, tau: float, n_classes: int) -> np.ndarray:
    """Temperature-weighted vote of the k most cosine-similar stored features.

    Returns an int array of shape (n_test,); ties go to the smaller label.
    """
    ### BEGIN SOLUTION
    bank = np.asarray(train_h, dtype=float)
    queries = np.asarray(test_h, dtype=float)
    labels = np.asarray(train_y).astype(int)
    bank = bank / np.linalg.norm(bank, axis=1, keepdims=True)
    queries = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    sims = queries @ bank.T                                   # (n_test, n_train)
    kk = min(int(k), bank.shape[0])
    # stable: among equal similarities the smaller training index comes first
    nbr = np.argsort(-sims, axis=1, kind="stable")[:, :kk]   # (n_test, kk)
    s = np.take_along_axis(sims, nbr, axis=1)
    weights = np.exp((s - s.max(axis=1, keepdims=True)) / tau)  # every exponent <= 0
    votes = np.zeros((len(queries), n_classes))
    rows = np.repeat(np.arange(len(queries)), kk)
    np.add.at(votes, (rows, labels[nbr].ravel()), weights.ravel())
    return np.argmax(votes, axis=1).astype(np.int64)          # first maximum: smaller label
    ### END SOLUTION
'''

VISIBLE_TESTS = r"""import numpy as np

bank = np.array([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0], [-1.0, 0.0]])
labels = np.array([0, 1, 1, 2])
query = np.array([[0.7, 0.5]])

pred = knn_classify(bank, labels, query, 1, 0.07, 3)
assert isinstance(pred, np.ndarray), "return a NumPy array"
assert pred.shape == (1,), f"one label per query: expected shape (1,), got {pred.shape}"
assert pred[0] == 1, "with k = 1 the most similar stored feature ([0.8, 0.6]) decides"

# lengths do not matter, only directions: each stored row gets its own length here,
# and without normalisation the long first row would win the dot product
lengths = np.array([[5.0], [0.2], [3.0], [1.0]])
assert knn_classify(lengths * bank, labels, 0.1 * query, 1, 0.07, 3)[0] == 1, \
    "giving the rows different lengths changed the prediction: normalise both banks"

# k = 3, large tau: almost an unweighted vote, class 1 has two of three neighbours
assert knn_classify(bank, labels, query, 3, 100.0, 3)[0] == 1, \
    "with a very large tau every neighbour votes with weight about 1"
print("visible tests passed")
"""
VISIBLE_POINTS = 2

HIDDEN = [
    "knn_classify/matches_reference",
    "knn_classify/small_tau",
    "knn_classify/k_larger_than_bank",
    "knn_classify/ties",
    "knn_classify/ties_at_kth",
    "knn_classify/properties",
]

"""Exercise spec: folding a non-affine BatchNorm into a linear probe (book/batchnorm.md)."""

NAME = "fold_batchnorm"
TITLE = "Fold a frozen BatchNorm into the probe"
LEVEL = "warm-up"
ASSIGNMENT = "batchnorm"
CHAPTER = "batchnorm"

STATEMENT = r"""
In evaluation mode a non-affine BatchNorm in front of a probe is a fixed affine map: it
subtracts a stored mean $\mu$ and divides by a stored standard deviation $s$. The probe
on the normalised features computes logits $W^\top\big((h-\mu)/s\big) + b$. The same
logits come from a probe on the raw features with new weights. Write

```python
fold_batchnorm(W, b, mu, s)
```

**Inputs.** `W` of shape `(d, K)` (one column per class), `b` of shape `(K,)`, and `mu`,
`s` of shape `(d,)` with every $s_j > 0$.

**Return** `(W_folded, b_folded)` with shapes `(d, K)` and `(K,)` such that
$W_{\text{folded}}^\top h + b_{\text{folded}} = W^\top\big((h-\mu)/s\big) + b$ for every
$h$: row $j$ of `W` divided by $s_j$, and the mean moved into the bias,
$b_{\text{folded}} = b - W_{\text{folded}}^\top\mu$.

Raise `ValueError` if some entry of `s` is zero or negative. Do not modify the inputs (the
caller's probe must not change).
"""

SOLUTION = r'''import numpy as np


def fold_batchnorm(W, b, mu, s):
    """Weights and bias of the raw-feature probe equal to BatchNorm(mu, s) + probe(W, b)."""
    ### BEGIN SOLUTION
    W = np.asarray(W, dtype=float)
    b = np.asarray(b, dtype=float)
    mu = np.asarray(mu, dtype=float)
    s = np.asarray(s, dtype=float)
    if np.any(~(s > 0)):
        raise ValueError("s must be strictly positive (it is a standard deviation)")
    W_folded = W / s[:, None]
    b_folded = b - W_folded.T @ mu
    return W_folded, b_folded
    ### END SOLUTION
'''

VISIBLE_TESTS = r"""import numpy as np

# the worked example of the chapter: d = K = 2
W = np.array([[1.0, -1.0], [2.0, 0.0]])      # columns w_1 = (1, 2), w_2 = (-1, 0)
b = np.array([0.5, 0.0])
mu = np.array([1.0, -2.0])
s = np.array([2.0, 0.5])
h = np.array([3.0, -1.0])

W2, b2 = fold_batchnorm(W, b, mu, s)
assert np.shape(W2) == (2, 2) and np.shape(b2) == (2,), "keep the shapes (d, K) and (K,)"
assert np.allclose(W2, [[0.5, -0.5], [4.0, 0.0]]), f"folded weights: got {W2}"
assert np.allclose(b2, [8.0, 0.5]), f"folded bias: got {b2}"
assert np.allclose(h @ W2 + b2, [5.5, -1.0]), "the folded probe must give logits 5.5 and -1"
print("visible tests passed")
"""
VISIBLE_POINTS = 2

HIDDEN = [
    "fold_batchnorm/matches_reference",
    "fold_batchnorm/logits_identity",
    "fold_batchnorm/rejects_bad_scale",
    "fold_batchnorm/properties",
]

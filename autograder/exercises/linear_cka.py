"""Exercise spec: linear centred kernel alignment (book/cka.md; seed 003)."""

NAME = "linear_cka"
TITLE = "Linear CKA between two representations"
LEVEL = "warm-up"
ASSIGNMENT = "cka"
CHAPTER = "cka"

STATEMENT = r"""
Do two encoders, or two layers of one encoder, arrange the same samples in the same way?
Centred kernel alignment (Kornblith et al. 2019) answers with a number between 0 and 1
that ignores rotations, offsets and the overall scale of either representation. Write

```python
linear_cka(X, Y)
```

**Inputs.** Two representations of the **same** $n$ samples, in the same order: `X` of
shape `(n, p)` and `Y` of shape `(n, q)`; the widths `p` and `q` may differ.

**What to compute.**

1. Centre the columns: $\tilde X = X - \bar x$, $\tilde Y = Y - \bar y$ (subtract each
   column's mean). Without this step a constant offset shared by all samples dominates
   the score.
2. Return, as a Python float,
   $$\mathrm{CKA}(X, Y) = \frac{\lVert \tilde X^\top \tilde Y\rVert_F^2}
   {\lVert \tilde X^\top \tilde X\rVert_F\, \lVert \tilde Y^\top \tilde Y\rVert_F}.$$

This is the ratio of HSIC values of the linear Gram matrices $K = XX^\top$,
$L = YY^\top$, rewritten so that only $p \times q$, $p \times p$ and $q \times q$
products appear: never form an $n \times n$ matrix (the hidden tests use 6000 samples and
measure the memory). Do **not** add a small constant such as `1e-10` to the denominator:
it makes the value depend on the scale of the features, which CKA must not. You may
assume that neither input is constant. Do not modify the inputs.
"""

SOLUTION = r'''import numpy as np


def linear_cka(X, Y):
    """Linear CKA of two representations of the same samples (feature-space form)."""
    ### BEGIN SOLUTION
    Xc = np.asarray(X, dtype=float)
    Yc = np.asarray(Y, dtype=float)
    Xc = Xc - Xc.mean(axis=0)
    Yc = Yc - Yc.mean(axis=0)
    cross = np.linalg.norm(Xc.T @ Yc) ** 2
    return float(cross / (np.linalg.norm(Xc.T @ Xc) * np.linalg.norm(Yc.T @ Yc)))
    ### END SOLUTION
'''

VISIBLE_TESTS = r"""import numpy as np

rng = np.random.default_rng(0)
X = rng.normal(size=(200, 6))
Q, _ = np.linalg.qr(rng.normal(size=(6, 6)))

c = linear_cka(X, X)
assert isinstance(c, float), "return a Python float"
assert abs(c - 1.0) < 1e-12, f"a representation is identical to itself: CKA = 1, got {c}"
assert abs(linear_cka(X, 5.0 * X @ Q + 3.0) - 1.0) < 1e-9, \
    "rotating, rescaling and shifting a representation leaves CKA at 1"

Z = rng.normal(size=(200, 4))
low = linear_cka(X, Z)
assert 0.0 <= low < 0.2, f"independent random features give a small CKA, got {low}"
assert abs(linear_cka(X, Z) - linear_cka(Z, X)) < 1e-12, "CKA is symmetric"
print("visible tests passed")
"""
VISIBLE_POINTS = 1

HIDDEN = [
    "linear_cka/matches_reference",
    "linear_cka/translation_invariance",
    "linear_cka/scale_invariance",
    "linear_cka/properties",
    "linear_cka/no_gram_matrix",
]

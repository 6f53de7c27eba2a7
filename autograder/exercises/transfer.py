"""Exercise spec: linear probing, fine-tuning and LP-FT in a linear network (book/lpft.md; seed
000)."""

NAME = "transfer"
TITLE = "Feature distortion and LP-FT"
LEVEL = "research"
ASSIGNMENT = "lpft"
CHAPTER = "lpft"

STATEMENT = r"""
Kumar et al. (2022) explain why fine-tuning a good pretrained encoder from a random head
can lose to a plain linear probe on shifted data, and why probing first and fine-tuning
afterwards (LP-FT) avoids the loss. Their argument already works for a two-layer
*linear* network $f(x) = v^\top B x$, with features $B$ of shape $(d', d)$ and a head $v$
of length $d'$. You will reproduce it numerically.

```python
transfer(X, y, B0, v0, lr, steps)
```

**Inputs.** In-distribution (ID) training inputs `X` of shape `(n, d)`, targets `y` of
shape `(n,)`, pretrained features `B0` of shape `(d', d)`, an initial head `v0` of shape
`(d',)`, a step size `lr > 0` and a number of steps `steps >= 0`.

**The loss and its gradients.** With residuals $r = X B^\top v - y$,
$$\mathcal{L}(v, B) = \tfrac1n \lVert r \rVert^2, \qquad
\nabla_v \mathcal{L} = \tfrac2n B X^\top r, \qquad
\nabla_B \mathcal{L} = \tfrac2n\, v\, (X^\top r)^\top .$$

**Three methods**, each plain full-batch gradient descent for exactly `steps` steps of size
`lr`:

* `"lp"` (linear probing): start at `(v0, B0)` and update only `v`; `B` stays `B0`.
* `"ft"` (fine-tuning): start at `(v0, B0)` and update both.
* `"lpft"`: start at `(v_LP, B0)`, where `v_LP` is the head that `"lp"` ended with, and
  update both for `steps` steps.

**Simultaneous updates.** In every step, compute *both* gradients at the current
`(v, B)` first, and only then replace `v` and `B`. Updating `v` and then taking the
gradient for `B` at the new `v` is a different algorithm, and the hidden tests compare
single steps.

**Return** the dict `{"lp": (v, B), "ft": (v, B), "lpft": (v, B)}` of NumPy arrays of shapes
`(d',)` and `(d', d)`. Do not modify the inputs (work on copies).

**What you should see.** The hidden tests also run your function on the chapter's setup
(`repeval_ref.datasets.transfer_setup`: inputs in $\mathbb{R}^{20}$, three true features,
24 ID inputs spanning only an 8-dimensional subspace, shifted test inputs everywhere) and
measure errors against the true function. Because the gradient for $B$ is built from
$X^\top r$, features move only inside the span of the ID inputs: FT fits the ID data
perfectly but is several times worse than LP out of distribution, while LP-FT, starting
from a head that already fits, barely moves the features and is the best of the three
out of distribution.
"""

SOLUTION = r'''import numpy as np


def transfer(X, y, B0, v0,          # ID data, pretrained model
             lr, steps):
    """Gradient descent for LP, FT and LP-FT on (1/n)||X B^T v - y||^2.

    Returns {"lp": (v, B), "ft": (v, B), "lpft": (v, B)}.
    """
    ### BEGIN SOLUTION
    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    n = X.shape[0]

    def descend(v, B, train_features):
        v, B = np.array(v, dtype=float), np.array(B, dtype=float)
        for _ in range(steps):
            residual = X @ (B.T @ v) - y
            back = X.T @ residual                     # (d,)
            step_v = (2.0 / n) * (B @ back)           # both gradients at the current
            step_B = (2.0 / n) * np.outer(v, back)    # (v, B), before either moves
            v = v - lr * step_v
            if train_features:
                B = B - lr * step_B
        return v, B

    probed = descend(v0, B0, False)
    return {
        "lp": probed,
        "ft": descend(v0, B0, True),
        "lpft": descend(probed[0], B0, True),
    }
    ### END SOLUTION
'''

VISIBLE_TESTS = r"""import numpy as np

# The chapter's two-dimensional example: perfect features B0 = (c, c), ID inputs on the
# x1 axis only, targets y = c x1 + c x2 = c x1.
c = 1 / np.sqrt(2)
X = np.array([[1.0, 0.0], [-2.0, 0.0], [0.5, 0.0]])
y = c * X[:, 0]
B0 = np.array([[c, c]])

out = transfer(X, y, B0, np.zeros(1), 0.1, 300)
assert set(out) == {"lp", "ft", "lpft"}, f"expected the keys lp, ft, lpft, got {sorted(out)}"
v_lp, B_lp = out["lp"]
assert np.shape(v_lp) == (1,) and np.shape(B_lp) == (1, 2), "v has shape (d',), B (d', d)"
assert np.array_equal(B_lp, B0), "linear probing must leave B equal to B0"
assert np.allclose(v_lp, [1.0], atol=1e-6), "LP on perfect features finds the true head v = 1"

v_ft, B_ft = out["ft"]
assert np.isclose(B_ft[0, 1], c), \
    "no ID input has an x2 component, so fine-tuning cannot change the weight on x2"
assert abs(B_ft[0, 0] - c) > 0.1, "fine-tuning from v0 = 0 should distort the x1 weight"

v_lpft, B_lpft = out["lpft"]
assert np.allclose(B_lpft, B0, atol=1e-6), "LP-FT starts where the ID residuals are 0"

# one step from v0 = 0: B's gradient is zero (it carries a factor v), only v moves
one = transfer(X, y, B0, np.zeros(1), 0.1, 1)
r = X @ B0.T @ np.zeros(1) - y
assert np.allclose(one["ft"][0], -0.1 * (2 / 3) * B0 @ (X.T @ r)), "first step of v"
assert np.allclose(one["ft"][1], B0), "first step of B from v0 = 0 leaves B unchanged"
print("visible tests passed")
"""
VISIBLE_POINTS = 2

HIDDEN = [
    "transfer/matches_reference",
    "transfer/simultaneous_updates",
    "transfer/kumar_ordering",
    "transfer/properties",
]

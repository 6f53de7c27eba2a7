"""Exercise spec: RankMe, the effective rank of an embedding matrix (book/rankme.md; seeds 000,
002)."""

NAME = "rankme"
TITLE = "RankMe: the effective rank of embeddings"
LEVEL = "core"
ASSIGNMENT = "rankme"
CHAPTER = "rankme"

STATEMENT = r"""
Without labels you cannot probe a representation, but you can still see whether it has
collapsed. RankMe (Garrido et al. 2023) measures the entropy of the singular-value
spectrum: its exponential is the number of equally strong directions that would spread
the embeddings as much. Write

```python
rankme(Z, center=False, eps=1e-7)
```

**Input.** An embedding matrix `Z` of shape `(n, d)`, one row per sample (not all zero).

**What to compute.**

1. If `center` is True, subtract the mean of each column first; by default (`False`) use
   `Z` as it is, which is what Garrido et al. do. (The two conventions give different
   numbers: say which one you use when you compare.)
2. Take the singular values $\sigma_1, \dots, \sigma_m$ of the matrix, $m = \min(n, d)$
   (`np.linalg.svd(..., compute_uv=False)`).
3. Form the shares $p_i = \sigma_i / \sum_j \sigma_j + \varepsilon$, adding `eps` to every
   share.
4. Return $\exp\bigl(-\sum_i p_i \log p_i\bigr)$ as a Python float, where a term with
   $p_i = 0$ (possible only with `eps = 0`) counts as 0.

A check by hand: the spectrum $(3, 3, 3, 0)$ has the shares $(1/3, 1/3, 1/3, 0)$, whose
entropy is $\log 3$, so its effective rank is 3 (exactly 3 with `eps = 0`). Rotating or rescaling the
embeddings does not change the value. Do not modify `Z`.
"""

SOLUTION = r'''import numpy as np


def rankme(Z, center=False, eps=1e-7):
    """exp(entropy) of the normalised singular values of Z (plus eps per share)."""
    ### BEGIN SOLUTION
    Z = np.asarray(Z, dtype=float)
    if center:
        Z = Z - Z.mean(axis=0)
    sigma = np.linalg.svd(Z, compute_uv=False)
    shares = sigma / sigma.sum() + eps
    shares = shares[shares > 0]                    # 0 log 0 = 0
    return float(np.exp(-np.sum(shares * np.log(shares))))
    ### END SOLUTION
'''

VISIBLE_TESTS = r"""import numpy as np

Z = np.diag([3.0, 3.0, 3.0, 0.0])
r = rankme(Z, eps=0.0)
assert isinstance(r, float), "return a Python float"
assert abs(r - 3.0) < 1e-12, f"singular values (3, 3, 3, 0) give effective rank 3, got {r}"
assert abs(rankme(Z) - 3.0) < 1e-5, "the default eps = 1e-7 barely changes the value"

# one dominant direction: close to 1
rng = np.random.default_rng(0)
line = np.outer(rng.normal(size=50), rng.normal(size=8)) + 1e-6 * rng.normal(size=(50, 8))
assert rankme(line) < 1.01, "a rank-one cloud has effective rank about 1"

# centring matters for a cloud far from the origin
cloud = rng.normal(size=(100, 5)) + 50.0
assert rankme(cloud) < 1.5 < rankme(cloud, center=True), \
    "uncentred, the mean direction dominates; centred, all five directions count"
print("visible tests passed")
"""
VISIBLE_POINTS = 2

HIDDEN = [
    "rankme/matches_reference",
    "rankme/center_option",
    "rankme/known_spectra",
    "rankme/properties",
]

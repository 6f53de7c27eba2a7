"""Exercise spec: the TwoNN intrinsic-dimension estimate (book/rankme.md; seed 002)."""

NAME = "two_nn_id"
TITLE = "Intrinsic dimension by TwoNN"
LEVEL = "core"
ASSIGNMENT = "rankme"
CHAPTER = "rankme"

STATEMENT = r"""
Embeddings in $\mathbb{R}^{768}$ often lie near a surface of far fewer dimensions. The
TwoNN estimator (Facco et al. 2017) reads that dimension from the nearest neighbours
alone: on a locally uniform $k$-dimensional manifold, the ratio $\mu = r_2 / r_1$ of a
point's second to first nearest-neighbour distance follows a Pareto law with shape $k$,
whose maximum-likelihood estimate is $N / \sum_i \log \mu_i$. Write

```python
two_nn_id(X)
```

**Input.** Points `X` of shape `(N, D)`, one per row, `N >= 3`.

**What to compute.**

1. For each point, $r_1$ and $r_2$: the Euclidean distances to its nearest and second
   nearest **other** points (a point is not its own neighbour).
2. If some $r_1$ is 0 (two identical points), raise `ValueError`: the ratio is undefined.
3. Return $\hat d = N / \sum_{i=1}^N \log(r_{2,i} / r_{1,i})$ as a Python float (all points
   are used; none is discarded).

**Memory.** Do not build the $N \times N$ matrix of all distances: for a million embeddings
it would need terabytes. A k-d tree needs $O(N)$ memory: `scipy.spatial.cKDTree(X).query(X,
k=3)` returns each point itself (distance 0) followed by its two nearest neighbours, and
`sklearn.neighbors.NearestNeighbors(n_neighbors=2).fit(X).kneighbors()` (no argument)
leaves the points themselves out. Do not expect it to be fast in high dimension: a k-d tree
query costs about $O(\log N)$ only when $D$ is small, and at $D = 768$ it ends up comparing the
query with most of the points, so the whole search costs nearly the $O(N^2 D)$ of brute force.
What the tree saves there is memory; a brute-force search over blocks of a few hundred rows
at a time saves it too (scikit-learn's `NearestNeighbors` chooses brute force for wide data
and computes the distances in chunks). The hidden tests measure the memory your function
allocates for 6000 points.

The estimate ignores rotations, translations and rescaling of `X`. Do not modify `X`.
"""

SOLUTION = r'''import numpy as np
from scipy.spatial import cKDTree


def two_nn_id(X):
    """TwoNN maximum-likelihood intrinsic dimension N / sum(log(r2 / r1))."""
    ### BEGIN SOLUTION
    X = np.asarray(X, dtype=float)
    dist, _ = cKDTree(X).query(X, k=3)     # column 0: the point itself
    r1, r2 = dist[:, 1], dist[:, 2]
    if np.any(r1 == 0):
        raise ValueError("X contains duplicate points (a first-neighbour distance is 0)")
    return float(len(X) / np.sum(np.log(r2 / r1)))
    ### END SOLUTION
'''

VISIBLE_TESTS = r"""import numpy as np

# four points on a line, worked by hand
X = np.array([[0.0], [1.0], [3.0], [7.0]])
# r1, r2 per point: 0 -> (1, 3), 1 -> (1, 2), 3 -> (2, 3), 7 -> (4, 6)
expected = 4 / (np.log(3) + np.log(2) + np.log(1.5) + np.log(1.5))
d = two_nn_id(X)
assert isinstance(d, float), "return a Python float"
assert abs(d - expected) < 1e-12, f"expected {expected:.6f}, got {d}"

# a plane inside R^5 has intrinsic dimension about 2
rng = np.random.default_rng(0)
plane = rng.uniform(size=(2000, 2)) @ rng.normal(size=(2, 5))
assert 1.7 < two_nn_id(plane) < 2.3, "uniform points on a plane: about 2"

try:
    two_nn_id(np.array([[0.0, 0.0], [0.0, 0.0], [1.0, 2.0]]))
except ValueError:
    pass
else:
    raise AssertionError("duplicate points must raise ValueError")
print("visible tests passed")
"""
VISIBLE_POINTS = 2

HIDDEN = [
    "two_nn_id/matches_reference",
    "two_nn_id/duplicates",
    "two_nn_id/no_n_by_n_matrix",
    "two_nn_id/properties",
]

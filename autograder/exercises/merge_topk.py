"""Exercise spec: merging sharded top-k lists (book/torchloop.md; the sharded k-NN)."""

NAME = "merge_topk"
TITLE = "Exact top-k from a sharded bank"
LEVEL = "core"
ASSIGNMENT = "torchloop"
CHAPTER = "torchloop"

STATEMENT = r"""
A k-NN evaluation on a large feature bank is often spread over several processes: rank
`s` holds a contiguous slice of the bank, rows `offsets[s]`, `offsets[s] + 1`, ..., finds
for every query the most similar rows *of its own slice*, and sends back their
similarities and their row numbers *within the slice*. Your job is the last step, the one
that turns those lists into the exact answer for the whole bank. Write

```python
merge_topk(shard_vals: list, shard_idx: list, offsets: list, k: int) -> tuple
```

**Inputs.** For `S` shards: `shard_vals[s]`, a float array of shape `(m, k_s)` (one row per
query), `shard_idx[s]`, an integer array of the same shape holding *local* row numbers
(`0` is the shard's first row), and `offsets[s]`, the global index of the shard's first
row. A shard with fewer than `k` rows reports all of them (`k_s < k`); an empty shard
reports arrays of shape `(m, 0)`. Within one shard the columns can be in any order.

**What to compute, for each query.** Turn every local index into a global one
(`offsets[s] + local`), pool the candidates of all shards, and keep the `k` largest
similarities, sorted in decreasing order. When several candidates share a similarity,
the one with the smaller **global** index comes first, and if the tie sits at the
`k`-th place the smaller indices are kept. If all shards together hold fewer than `k`
candidates, return all of them.

**Return** a tuple `(vals, idx)`: `vals` a float array and `idx` an integer array of
global indices, both of shape `(m, min(k, total number of candidates))`. Do not modify
the inputs.

**Why this is exact.** A row among the `k` most similar of the whole bank has fewer
competitors inside its own shard, so it is among that shard's `k` best: the pooled lists
contain the answer. With the tie rule above, the result is the top-k of the
concatenated bank, whichever way it was cut into shards; the sharded k-NN of the
course's PyTorch loop relies on exactly this.

Hint: `np.lexsort((secondary, primary), axis=1)` sorts each row by `primary` first (pass
`-vals` for decreasing similarity), then by `secondary`.
"""

SOLUTION = r'''import numpy as np


def merge_topk(shard_vals: list, shard_idx: list, offsets: list, k: int) -> tuple:
    """Merge per-shard top-k lists (local indices) into the exact global top-k.

    Returns (vals, idx) of shape (m, min(k, total candidates)): similarities in
    decreasing order and global indices, ties to the smaller global index.
    """
    ### BEGIN SOLUTION
    vals = np.concatenate([np.asarray(v, dtype=float) for v in shard_vals], axis=1)
    glob = np.concatenate([np.asarray(i).astype(np.int64) + int(off)
                           for i, off in zip(shard_idx, offsets)], axis=1)
    kk = min(int(k), vals.shape[1])
    # the last key is the primary one: similarity decreasing, then global index increasing
    order = np.lexsort((glob, -vals), axis=1)[:, :kk]
    return np.take_along_axis(vals, order, axis=1), np.take_along_axis(glob, order, axis=1)
    ### END SOLUTION
'''

VISIBLE_TESTS = r"""import numpy as np

# a bank of 5 rows cut into shards [0, 1, 2] and [3, 4]; one query, k = 2
shard_vals = [np.array([[0.9, 0.4]]), np.array([[0.95, 0.1]])]
shard_idx = [np.array([[2, 0]]), np.array([[1, 0]])]     # local row numbers
offsets = [0, 3]

vals, idx = merge_topk(shard_vals, shard_idx, offsets, 2)
assert np.shape(vals) == (1, 2) and np.shape(idx) == (1, 2), \
    f"expected two arrays of shape (1, 2), got {np.shape(vals)} and {np.shape(idx)}"
assert np.allclose(vals, [[0.95, 0.9]]), "the similarities must be the two largest, decreasing"
assert list(idx[0]) == [4, 2], \
    "local row 1 of the second shard is global row 3 + 1 = 4: add each shard's offset"

# ties: global rows 1 and 3 have the same similarity; the smaller index comes first
vals, idx = merge_topk([np.array([[0.5]]), np.array([[0.5]])],
                       [np.array([[1]]), np.array([[0]])], [0, 3], 1)
assert list(idx[0]) == [1], "among equal similarities keep the smaller global index"
print("visible tests passed")
"""
VISIBLE_POINTS = 2

HIDDEN = [
    "merge_topk/matches_whole_bank",
    "merge_topk/ties_across_shards",
    "merge_topk/short_and_empty_shards",
    "merge_topk/properties",
]

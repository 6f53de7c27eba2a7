"""Exercise spec: the forward pass of a multi-head attentive probe (book/attentive.md; seed 000)."""

NAME = "attentive_probe"
TITLE = "Forward pass of an attentive probe"
LEVEL = "interview"
ASSIGNMENT = "attentive"
CHAPTER = "attentive"

STATEMENT = r"""
A linear probe reads one pooled vector per image. An attentive probe instead lets each of
its heads decide which patch tokens to read: one learned query per head scores every
token, and the head returns the softmax-weighted average of the tokens' values. Write the
forward pass for a whole batch, without Python loops over images or heads:

```python
attentive_probe(H, q, Wk, Wv, Wo, W_cls,    # tokens, query, weights
                n_heads, n_prefix=0)        # head count, tokens to skip
```

**Inputs.** Frozen tokens `H` of shape `(B, T, d)` (B images, T tokens each), the learned
query `q` of shape `(d,)`, square matrices `Wk`, `Wv`, `Wo` of shape `(d, d)`, the
classifier `W_cls` of shape `(d, K)`, the number of heads `n_heads` (it divides `d`; each
head has width $d_k = d / n_{\text{heads}}$) and `n_prefix`, the number of leading tokens
that are not patches (class token, registers), with `0 <= n_prefix < T`.

**What to compute, for each image.**

1. Throw away the first `n_prefix` tokens; $T' = T - n_{\text{prefix}}$ patch tokens
   remain, forming $H'$ of shape $(T', d)$.
2. Keys $K = H' W_K$ and values $V = H' W_V$, both $(T', d)$.
3. Heads are counted from 0. Head $j$ owns the contiguous columns
   $j d_k, \dots, (j+1) d_k - 1$ of $K$, of $V$ and of $q$: call these blocks $K_j$, $V_j$
   (shape $(T', d_k)$) and $q_j$ (length $d_k$).
4. The weights of head $j$ over the tokens are
   $a_j = \mathrm{softmax}\big(K_j q_j / \sqrt{d_k}\big)$, a vector of length $T'$.
5. Head $j$ answers $V_j^\top a_j$ (length $d_k$); stacking the answers of heads
   $0, 1, \dots$ in order gives $o$ of length $d$.
6. The logits are $W_{\text{cls}}^\top W_O^\top o$, i.e. the row vector `o @ Wo @ W_cls`.

**Return** the pair `(logits, A)`: the class scores as a `(B, K)` array, and the
attention weights as a `(B, n_heads, T - n_prefix)` array whose entry `A[b, j]` holds
the weights $a_j$ of image `b`. Both are float arrays. Do not modify the inputs.

**Numerical stability.** The hidden tests use scores in the thousands; compute the softmax
so that no exponential overflows (subtract the largest score of each row first).

*Hint:* `X.reshape(B, T', n_heads, d_k)` splits the last axis into contiguous blocks, and
`np.einsum` contracts the head axes without a loop.
"""

SOLUTION = r'''import numpy as np

# One learned query per head reads the patch tokens.


def attentive_probe(H, q, Wk, Wv, Wo, W_cls,    # tokens, query and weights
                    n_heads, n_prefix=0):
    """Logits (B, K) and attention weights (B, n_heads, T - n_prefix) of the probe."""
    ### BEGIN SOLUTION
    H = np.asarray(H, dtype=float)
    q = np.asarray(q, dtype=float)
    n_images, n_tokens, width = H.shape
    head_width = width // n_heads
    patches = H[:, n_prefix:, :]                            # drop class token / registers
    kept = n_tokens - n_prefix
    keys = (patches @ Wk).reshape(n_images, kept, n_heads, head_width)
    values = (patches @ Wv).reshape(n_images, kept, n_heads, head_width)
    queries = q.reshape(n_heads, head_width)
    scores = np.einsum("bthc,hc->bht", keys, queries) / np.sqrt(head_width)
    scores = scores - scores.max(axis=-1, keepdims=True)    # every exponent <= 0
    weights = np.exp(scores)
    weights /= weights.sum(axis=-1, keepdims=True)          # (B, n_heads, T')
    pooled = np.einsum("bht,bthc->bhc", weights, values).reshape(n_images, width)
    return pooled @ Wo @ W_cls, weights
    ### END SOLUTION
'''

VISIBLE_TESTS = r"""import numpy as np

# two images, a class token followed by three patch tokens, d = 4, two heads of width 2
rng = np.random.default_rng(1)
H = rng.normal(size=(2, 4, 4))
I = np.eye(4)
W_cls = rng.normal(size=(4, 3))

# a zero query scores every patch equally: each head averages the patches
logits, A = attentive_probe(H, np.zeros(4), I, I, I, W_cls, 2, n_prefix=1)
assert np.shape(A) == (2, 2, 3), f"A must have shape (B, n_heads, T - n_prefix) = (2, 2, 3), got {np.shape(A)}"
assert np.shape(logits) == (2, 3), f"logits must have shape (B, K) = (2, 3), got {np.shape(logits)}"
assert np.allclose(A, 1 / 3), "with q = 0 every one of the 3 patch tokens gets weight 1/3"
assert np.allclose(logits, H[:, 1:].mean(axis=1) @ W_cls), \
    "with q = 0 and identity matrices the logits are (mean of the patch tokens) @ W_cls"

# each row of A is a probability vector over the tokens
logits, A = attentive_probe(H, rng.normal(size=4), I, I, I, W_cls, 2, n_prefix=1)
assert np.all(A >= 0) and np.allclose(A.sum(axis=-1), 1), "the softmax runs over the tokens"
print("visible tests passed")
"""
VISIBLE_POINTS = 2

HIDDEN = [
    "attentive_probe/matches_reference",
    "attentive_probe/prefix_dropped",
    "attentive_probe/stable_softmax",
    "attentive_probe/properties",
]

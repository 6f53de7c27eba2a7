"""Hidden checks of the exercise "Weighted k-NN classifier" (book/knn.md).

Contract: ``knn_classify`` (bank ``train_h``, labels ``train_y``, queries ``test_h``, then
``k``, ``tau``, ``n_classes``) returns an int
array (n_test,): unit-normalised banks, cosine similarities, the k largest (all if k >
n_train), votes ``exp(s / tau)`` summed per class, argmax with ties to the smaller label,
no overflow at small tau. Reference: :func:`repeval_ref.knn_classify`.
"""

from __future__ import annotations

import numpy as np

from ._framework import StudentError, call_student, finding, register
from ._helpers import as_array, count_mismatches, differs, frozen_copies, gate, mutated

EX = "knn_classify"


def _ref(*args):
    from repeval_ref import knn_classify

    return knn_classify(*args)


def _clusters(rng, n, d, K, spread=0.8):
    centres = rng.normal(size=(K, d))
    y = rng.integers(0, K, size=n)
    h = centres[y] + spread * rng.normal(size=(n, d))
    return h, y


def _rule(train_h, train_y, test_h, k, tau, n_classes, *, weighted=True):
    """The rule with ``k`` neighbours (clipped to 1 .. n_train), or with unweighted votes.

    The diagnoses below compare an answer with these variants of the reference on the
    check's own inputs: the answer's behaviour, never its source text, names the cause.
    """
    a = np.asarray(train_h, float)
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    q = np.asarray(test_h, float)
    q = q / np.linalg.norm(q, axis=1, keepdims=True)
    sims = q @ a.T
    kk = int(min(max(k, 1), sims.shape[1]))
    nbr = np.argsort(-sims, axis=1, kind="stable")[:, :kk]
    s = np.take_along_axis(sims, nbr, axis=1)
    w = np.exp((s - s[:, :1]) / tau) if weighted else np.ones_like(s)
    votes = np.zeros((len(q), n_classes))
    labels = np.asarray(train_y)[nbr]
    for i in range(len(q)):
        np.add.at(votes[i], labels[i], w[i])
    return np.argmax(votes, axis=1)


def _other_slip(got, train_h, train_y, test_h, k, tau, n_classes):
    """Whether ``got`` is the rule with k - 1 or k + 1 neighbours or with one vote each:
    slips that matches_reference charges, accepted by the checks of the ties and of the
    properties so that one slip is not charged again. 1-NN (k ignored) is not one."""
    variants = [
        _rule(train_h, train_y, test_h, kk, tau, n_classes) for kk in (k - 1, k + 1) if kk > 1
    ]
    variants.append(_rule(train_h, train_y, test_h, k, tau, n_classes, weighted=False))
    return any(count_mismatches(got, v) == 0 for v in variants)


def _diagnose(got, train_h, train_y, test_h, k, tau, n_classes):
    """The cause of wrong predictions ``got``, when they equal a typical mistake's.

    Returns
    -------
    str
        A sentence naming the mistake, or ``""`` when ``got`` matches none of them (or
        a mistake would not change the predictions on these inputs).
    """
    want = _ref(train_h, train_y, test_h, k, tau, n_classes)
    if count_mismatches(got, want) in (None, 0):
        return ""
    n_train = len(train_h)
    for shift in (-1, 1):
        kk = min(k, n_train) + shift
        if not 1 <= kk <= n_train:
            continue
        alt = _rule(train_h, train_y, test_h, kk, tau, n_classes)
        if count_mismatches(got, alt) == 0:
            return (
                f" Your predictions are those of the rule with {kk} neighbours instead "
                f"of {min(k, n_train)}: check the number of neighbours you keep (an "
                "off-by-one in k, e.g. [:, :k + 1] or [:, 1:k + 1])."
            )
    alt = _rule(train_h, train_y, test_h, k, tau, n_classes, weighted=False)
    if count_mismatches(got, alt) == 0:
        return (
            " Your predictions are those of a plain majority vote: every neighbour "
            "counted the same. Weigh each neighbour's vote by exp(s / tau), its "
            "similarity s divided by the temperature tau, and sum the weights per class."
        )
    return ""


def _predict(fn, *args):
    out, warns = call_student(fn, *args, what="knn_classify")
    return as_array(out, "knn_classify's result", ndim=1), warns


@register(
    f"{EX}/matches_reference",
    points=3,
    summary="same predictions as the weighted k-NN on features of mixed norms",
)
def matches_reference(fn, rng):
    K, d = 4, 8
    train_h, train_y = _clusters(rng, 90, d, K)
    test_h, _ = _clusters(rng, 40, d, K)
    # rows of very different lengths: only the cosine (unit rows) ignores them
    train_h *= np.exp(rng.uniform(-2.5, 2.5, size=(len(train_h), 1)))
    test_h *= np.exp(rng.uniform(-2.5, 2.5, size=(len(test_h), 1)))
    bad = []
    for k, tau in ((7, 0.07), (15, 0.5)):
        want = _ref(train_h, train_y, test_h, k, tau, K)
        got, _ = _predict(fn, train_h.copy(), train_y.copy(), test_h.copy(), k, tau, K)
        miss = count_mismatches(got, want)
        if miss is None:
            raise StudentError(
                f"knn_classify returned shape {got.shape}, expected "
                f"({len(test_h)},): one label per test row"
            )
        if miss:
            bad.append((k, tau, miss))
    if not bad:
        return [finding("matches the reference", True, 3, "")]
    k, tau, miss = bad[0]
    msg = (
        f"{miss} of 40 predictions differ from the weighted k-NN (k = {k}, tau = {tau}) "
        "on features whose rows have very different lengths."
    )
    # diagnose: does the student agree once we normalise the rows for them?
    unit = lambda a: a / np.linalg.norm(a, axis=1, keepdims=True)  # noqa: E731
    try:
        got_u, _ = _predict(fn, unit(train_h), train_y.copy(), unit(test_h), k, tau, K)
        if count_mismatches(got_u, _ref(train_h, train_y, test_h, k, tau, K)) == 0:
            msg += (
                " With rows already of unit length your predictions are right, so "
                "normalise both banks (h / ||h||) before the dot product: the "
                "protocol compares directions (cosine similarity), not lengths."
            )
    except StudentError:
        pass
    if "normalise" not in msg:
        got, _ = _predict(fn, train_h.copy(), train_y.copy(), test_h.copy(), k, tau, K)
        msg += _diagnose(got, train_h, train_y, test_h, k, tau, K)
    return [finding("matches the reference", False, 3, msg)]


def _near_votes(rng, q, near, tau, K):
    """A bank where, at this tau, the k = ``near`` weighted vote differs from 1-NN and
    from an unweighted vote. Each query has one row at cosine 0.99 (label A), two at
    0.99 - tau / 2 (label B != A: votes 2 exp(-1/2) > 1, so B wins), and ``near`` - 3 at
    0.99 - 40 tau (other labels, next to no weight); 60 more rows point elsewhere."""
    n_test, d = q.shape
    rows, labels = [], []
    for t in range(n_test):
        a, b, c = (int(v) for v in rng.choice(K, size=3, replace=False))
        cos = [0.99, 0.99 - tau / 2, 0.99 - tau / 2] + [0.99 - 40 * tau] * (near - 3)
        for j, cj in enumerate(cos):
            u = rng.normal(size=d)
            u -= (u @ q[t]) * q[t]
            u /= np.linalg.norm(u)
            rows.append(cj * q[t] + np.sqrt(1.0 - cj * cj) * u)  # cosine cj exactly
            labels.append(a if j == 0 else b if j < 3 else c)
    far = rng.normal(size=(60, d))
    train_h = np.vstack([np.array(rows), far / np.linalg.norm(far, axis=1, keepdims=True)])
    train_y = np.concatenate([labels, rng.integers(0, K, size=60)]).astype(np.int64)
    order = rng.permutation(len(train_y))
    return train_h[order], train_y[order]


@register(f"{EX}/small_tau", points=2, summary="no overflow at tau = 1e-3 and 1e-4")
def small_tau(fn, rng):
    d, K, n_test, near = 16, 5, 30, 6
    q = rng.normal(size=(n_test, d))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    out = []
    for tau, pts in ((1e-3, 1.0), (1e-4, 1.0)):
        train_h, train_y = _near_votes(rng, q, near, tau, K)
        want = _ref(train_h, train_y, q, near, tau, K)
        got, warns = _predict(fn, train_h.copy(), train_y.copy(), q.copy(), near, tau, K)
        miss = count_mismatches(got, want)
        overflow = any("overflow" in w or "invalid value" in w for w in warns)
        ok = miss == 0 and not overflow
        if overflow:
            msg = (
                f"votes overflow at tau = {tau:g}: exp(s / tau) is far beyond the largest "
                "float. Subtract each row's largest similarity before exponentiating "
                "(this rescales all votes of a row by the same factor, so the argmax is "
                "unchanged)."
            )
        elif miss is None:
            msg = f"returned shape {got.shape} at tau = {tau:g}, expected ({n_test},)"
        else:
            msg = (
                f"{miss} of {n_test} predictions differ at tau = {tau:g} (no overflow "
                "warning was raised). Each query has one neighbour at cosine 0.99 and "
                "two of another class tau / 2 lower: weighted by exp(s / tau) the two "
                "outvote the one (2 exp(-1/2) > 1), so the k neighbours vote with "
                "these weights, not the nearest alone and not one vote each."
            )
            msg += _diagnose(got, train_h, train_y, q, near, tau, K)
        out.append(finding(f"tau = {tau:g}", ok, pts, msg))
    return out


@register(
    f"{EX}/k_larger_than_bank", points=1, summary="k larger than the bank uses every stored feature"
)
def k_larger_than_bank(fn, rng):
    K, d = 3, 5
    for _ in range(50):  # a bank where every feature voting differs from the nearest alone
        train_h, train_y = _clusters(rng, 12, d, K, spread=1.5)
        test_h, _ = _clusters(rng, 10, d, K, spread=1.5)
        # unit rows, so that only the handling of k is tested here
        train_h /= np.linalg.norm(train_h, axis=1, keepdims=True)
        test_h /= np.linalg.norm(test_h, axis=1, keepdims=True)
        if not np.array_equal(
            _ref(train_h, train_y, test_h, 12, 0.3, K), _ref(train_h, train_y, test_h, 1, 0.3, K)
        ):
            break
    try:  # first a k inside the bank: a failure there is not about k > n_train
        _predict(fn, train_h.copy(), train_y.copy(), test_h.copy(), 5, 0.3, K)
    except StudentError as exc:
        return [finding("k > n_train", False, 1, f"with k = 5 and a bank of 12 rows: {exc}")]
    for k in (12, 20):
        want = _ref(train_h, train_y, test_h, k, 0.3, K)
        try:
            got, _ = _predict(fn, train_h.copy(), train_y.copy(), test_h.copy(), k, 0.3, K)
        except StudentError as exc:
            return [
                finding(
                    "k > n_train",
                    False,
                    1,
                    f"with k = {k} and a bank of 12 rows your function failed "
                    f"({exc}). When k exceeds the bank, every stored feature votes: "
                    "use min(k, n_train) neighbours.",
                )
            ]
        if count_mismatches(got, want) != 0:
            why = _diagnose(got, train_h, train_y, test_h, k, 0.3, K)
            if not why:
                why = " Every stored feature should vote (k = min(k, n_train))."
            return [
                finding(
                    "k > n_train",
                    False,
                    1,
                    f"with k = {k} and a bank of 12 rows the predictions differ." + why,
                )
            ]
    return [finding("k > n_train", True, 1, "")]


@register(f"{EX}/ties", points=1, summary="ties go to the smaller label")
def ties(fn, rng):
    d, K = 6, 5
    pairs = [(3, 1), (4, 0), (2, 1), (1, 4), (0, 3)]
    q = rng.normal(size=(len(pairs), d))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    rows, labels = [], []
    for i, (a, b) in enumerate(pairs):
        rows += [q[i], q[i]]  # two identical neighbours: identical votes
        labels += [a, b]
    far = -q + 0.01 * rng.normal(size=q.shape)  # dissimilar filler rows
    train_h = np.vstack([np.array(rows), far])
    train_y = np.array(labels + list(rng.integers(0, K, size=len(far))))
    # k = 2 for each query: its own two tied rows are the nearest (cosine 1)
    want = _ref(train_h, train_y, q, 2, 0.1, K)
    got, _ = _predict(fn, train_h.copy(), train_y.copy(), q.copy(), 2, 0.1, K)
    miss = count_mismatches(got, want)
    ok = miss == 0
    cause = _diagnose(got, train_h, train_y, q, 2, 0.1, K) if miss else ""
    if cause:  # the ties are right; the answer keeps a wrong number of neighbours
        return [
            finding(
                "ties",
                False,
                1,
                f"{miss} of {len(pairs)} predictions differ where each query has "
                "two identical neighbours of different labels and k = 2." + cause,
            )
        ]
    detail = ""
    if miss:
        i = int(np.flatnonzero(np.asarray(got) != want)[0])
        detail = (
            f" For example, two identical neighbours labelled {pairs[i][0]} and "
            f"{pairs[i][1]} give equal votes; you predicted {got[i]}, the rule "
            f"says {want[i]}."
        )
    return [
        finding(
            "ties",
            ok,
            1,
            "equal vote totals must go to the smaller label (np.argmax returns the "
            "first maximum, so apply it to votes indexed by class in increasing "
            "order)." + detail,
        )
    ]


@register(
    f"{EX}/ties_at_kth",
    points=1,
    summary="duplicated bank rows tied at the k-th place: the smaller indices are kept",
)
def ties_at_kth(fn, rng):
    # For every query the bank holds five exact copies of one row, the most similar to
    # the query, at scattered indices i1 < ... < i5 with labels (B, A, A, B, B), A != B,
    # among dissimilar filler rows. With k = 3 the rule keeps i1, i2, i3 (label A wins
    # two votes to one); keeping other copies (as np.argpartition may, or a reversed
    # sort) or a single neighbour (1-NN, k ignored) gives B.
    d, K, n_q, n_fill = 6, 5, 24, 50
    q = rng.normal(size=(n_q, d))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    n_train = n_fill + 5 * n_q
    train_h = np.empty((n_train, d))
    train_y = rng.integers(0, K, size=n_train)
    slots = rng.permutation(n_train)
    for t in range(n_q):
        idx = np.sort(slots[5 * t : 5 * t + 5])
        train_h[idx] = q[t]  # the same row five times (cosine 1)
        a, b = (int(v) for v in rng.choice(K, size=2, replace=False))
        train_y[idx] = [b, a, a, b, b]
    fill = slots[5 * n_q :]
    filler = rng.normal(size=(len(fill), d))
    # unit rows, so that only the selection among ties is tested here
    train_h[fill] = filler / np.linalg.norm(filler, axis=1, keepdims=True)
    want = _ref(train_h, train_y, q, 3, 0.1, K)
    got, _ = _predict(fn, train_h.copy(), train_y.copy(), q.copy(), 3, 0.1, K)
    miss = count_mismatches(got, want)
    if miss is None:
        raise StudentError(f"knn_classify returned shape {got.shape}, expected ({n_q},)")
    if miss and _other_slip(got, train_h, train_y, q, 3, 0.1, K):
        note = (
            "the ties are kept by the smaller indices, with a number of neighbours or a "
            "weighting that differs from the rule (see matches_reference)"
        )
        return [finding("ties at the k-th place", True, 1, note, note)]
    return [
        finding(
            "ties at the k-th place",
            miss == 0,
            1,
            f"{miss} of {n_q} predictions differ when the bank holds the same row "
            "five times (labels B, A, A, B, B at increasing indices) and k = 3: the "
            "rule keeps the k neighbours with the smaller indices among equal "
            "similarities (label A wins two votes to one). np.argpartition picks "
            "arbitrarily among ties; select with a stable sort, "
            "np.argsort(-sims, axis=1, kind='stable')[:, :k].",
        )
    ]


@register(
    f"{EX}/properties", points=1, summary="integer array of shape (n_test,), inputs left untouched"
)
def properties(fn, rng):
    K, d = 3, 4
    for _ in range(50):  # inputs where k and tau change the answer
        train_h, train_y = _clusters(rng, 20, d, K, spread=1.2)
        test_h, _ = _clusters(rng, 20, d, K, spread=1.2)
        want = _ref(train_h, train_y, test_h, 5, 0.07, K)
        if not (
            np.array_equal(want, _ref(train_h, train_y, test_h, 1, 0.07, K))
            or np.array_equal(want, _rule(train_h, train_y, test_h, 5, 0.07, K, weighted=False))
        ):
            break
    args = [train_h, train_y, test_h]
    before = frozen_copies(*args)
    out, _ = call_student(fn, *args, 5, 0.07, K, what="knn_classify")
    problems = []
    changed = mutated(before, args, ["train_h", "train_y", "test_h"])
    if changed:
        problems.append(
            f"your function modified its input {', '.join(changed)} in place "
            "(normalise into a new array instead of with /=)"
        )
    if not isinstance(out, np.ndarray):
        problems.append(f"it returned a {type(out).__name__}, expected a NumPy array")
    else:
        if not np.issubdtype(out.dtype, np.integer):
            problems.append(f"the labels have dtype {out.dtype}, expected an integer dtype")
        if out.shape != (20,):
            problems.append(f"the result has shape {out.shape}, expected (20,)")
        elif np.issubdtype(out.dtype, np.number) and (out.min() < 0 or out.max() >= K):
            problems.append("some predicted labels are outside 0 .. n_classes - 1")
    wrong = differs(out, want, rtol=0, atol=0)
    if wrong and isinstance(out, np.ndarray) and _other_slip(out, *before, 5, 0.07, K):
        wrong = ""  # k off by one or one vote each: matches_reference's to charge
    return gate(
        [finding("properties", not problems, 1, "; ".join(problems))],
        wrong and f"the predictions: {wrong}",
    )

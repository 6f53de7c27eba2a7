"""The graded exercise ``merge_topk`` (book/torchloop.md), end to end.

The reference solution scores full marks for several grading seeds, in this process and
in the clean room; honest answers written differently (a heapq merge of the shards'
sorted lists, a plain loop over rows with ``sorted``) score full marks too; each classic
mistake loses exactly the checks it should, with feedback that names it.
"""

import numpy as np
import pytest
from helpers.exercise_grading import (
    answer_function,
    assert_below_reference,
    assert_full_marks,
    assert_loses_exactly,
    scores,
)

from autograder.build import build_notebook, notebook_path, notebook_text, solution_source
from autograder.checks import check_points, run_check
from autograder.cleanroom import verify_source
from autograder.exercises import load

NAME = "merge_topk"
SEEDS = (1, 77, 4242)
FAST = {"call_s": 10.0, "start_s": 40.0, "cpu_s": 40, "memory_bytes": 2 << 30}

HONEST_HEAPQ = """
import heapq
import numpy as np


def merge_topk(shard_vals, shard_idx, offsets, k):
    out_v, out_i = [], []
    for r in range(np.shape(shard_vals[0])[0]):
        lists = []
        for v, i, off in zip(shard_vals, shard_idx, offsets):
            lists.append(sorted((-float(v[r, j]), int(i[r, j]) + int(off))
                                for j in range(np.shape(v)[1])))
        best = list(heapq.merge(*lists))[:k]
        out_v.append([-s for s, _ in best])
        out_i.append([g for _, g in best])
    return np.array(out_v, dtype=float), np.array(out_i, dtype=np.int64)
"""

HONEST_LOOP = """
import numpy as np


def merge_topk(shard_vals, shard_idx, offsets, k):
    m = len(shard_vals[0])
    rows = []
    for r in range(m):
        cands = []
        for s in range(len(shard_vals)):
            for j in range(len(shard_vals[s][r])):
                cands.append((shard_vals[s][r][j], shard_idx[s][r][j] + offsets[s]))
        cands.sort(key=lambda c: (-c[0], c[1]))
        rows.append(cands[:k])
    width = len(rows[0])
    vals = np.array([[c[0] for c in row] for row in rows], dtype=float).reshape(m, width)
    idx = np.array([[c[1] for c in row] for row in rows], dtype=np.int64).reshape(m, width)
    return vals, idx
"""

LOCAL_INDICES = """
import numpy as np


def merge_topk(shard_vals, shard_idx, offsets, k):      # forgets the offsets
    vals = np.concatenate(shard_vals, axis=1)
    idx = np.concatenate(shard_idx, axis=1)
    order = np.lexsort((idx, -vals), axis=1)[:, :k]
    return np.take_along_axis(vals, order, axis=1), np.take_along_axis(idx, order, axis=1)
"""

ARGSORT_UNSTABLE = """
import numpy as np


def merge_topk(shard_vals, shard_idx, offsets, k):      # ties in whatever order a sort gives
    vals = np.concatenate(shard_vals, axis=1)
    glob = np.concatenate([i + o for i, o in zip(shard_idx, offsets)], axis=1)
    order = np.argsort(vals, axis=1)[:, ::-1][:, :k]     # reversed ascending: larger index first
    return np.take_along_axis(vals, order, axis=1), np.take_along_axis(glob, order, axis=1)
"""

FIXED_K = """
import numpy as np


def merge_topk(shard_vals, shard_idx, offsets, k):      # assumes k columns come out
    vals = np.concatenate(shard_vals, axis=1)
    glob = np.concatenate([i + o for i, o in zip(shard_idx, offsets)], axis=1)
    order = np.lexsort((glob, -vals), axis=1)
    out_v = np.zeros((vals.shape[0], k))
    out_i = np.zeros((vals.shape[0], k), dtype=np.int64)
    n = min(k, order.shape[1])
    out_v[:, :n] = np.take_along_axis(vals, order[:, :n], axis=1)
    out_i[:, :n] = np.take_along_axis(glob, order[:, :n], axis=1)
    return out_v, out_i
"""

PRESORTED_SHARDS = """
import numpy as np


# takes each shard's first columns as its best
def merge_topk(shard_vals, shard_idx, offsets, k):
    per = max(1, -(-k // len(shard_vals)))
    vals = np.concatenate([v[:, :per] for v in shard_vals], axis=1)
    glob = np.concatenate([i[:, :per] + o for i, o in zip(shard_idx, offsets)], axis=1)
    order = np.lexsort((glob, -vals), axis=1)[:, :k]
    return np.take_along_axis(vals, order, axis=1), np.take_along_axis(glob, order, axis=1)
"""

WRONG = {
    "local_indices": (
        LOCAL_INDICES,
        {"matches_whole_bank"},
        "offset",
    ),
    "larger_index_on_ties": (ARGSORT_UNSTABLE, {"ties_across_shards"}, "smaller *global* index"),
    "fixed_k_columns": (FIXED_K, {"short_and_empty_shards"}, "return all"),
    "presorted_shards": (
        PRESORTED_SHARDS,
        {"matches_whole_bank", "ties_across_shards", "short_and_empty_shards", "properties"},
        "differs",
    ),
}


def _fn(source):
    return answer_function(source, NAME)


def _scores(fn, seed):
    return scores(NAME, fn, seed)


@pytest.mark.parametrize("source", ["solution", "heapq", "loop"])
def test_reference_and_honest_alternatives_score_full_marks(source):
    code = {"solution": solution_source(load(NAME)), "heapq": HONEST_HEAPQ, "loop": HONEST_LOOP}[
        source
    ]
    assert_full_marks(NAME, code, SEEDS)


@pytest.mark.parametrize("variant", sorted(WRONG))
def test_each_mistake_loses_exactly_its_checks_and_is_named(variant):
    source, failing, words = WRONG[variant]
    assert_loses_exactly(NAME, source, failing, words, SEEDS[:2])


def test_wrong_answers_score_below_the_reference():
    assert_below_reference(NAME, [source for source, _, _ in WRONG.values()])


def test_mutating_answer_loses_only_properties():
    right = _fn(solution_source(load(NAME)))

    def merge_topk(shard_vals, shard_idx, offsets, k):
        out = right(shard_vals, shard_idx, offsets, k)
        shard_vals[0][...] = 0.0  # scribbles on its input afterwards
        return out

    for aspect, (got, report) in _scores(merge_topk, 3).items():
        want = 0 if aspect == "properties" else check_points(f"{NAME}/{aspect}")
        assert got == want, report


def test_reference_function_and_solution_agree_with_brute_force():
    import repeval_ref as rr

    rng = np.random.default_rng(0)
    sims = rng.integers(0, 3, size=(8, 25)) / 3.0
    bounds = [(0, 4), (4, 4), (4, 19), (19, 25)]
    k = 7
    vals, idx = [], []
    for a, b in bounds:
        o = np.argsort(-sims[:, a:b], axis=1, kind="stable")[:, :k]
        vals.append(np.take_along_axis(sims[:, a:b], o, axis=1))
        idx.append(o)
    offsets = [a for a, _ in bounds]
    brute = np.argsort(-sims, axis=1, kind="stable")[:, :k]
    for fn in (rr.merge_topk, _fn(solution_source(load(NAME)))):
        v, i = fn(vals, idx, offsets, k)
        np.testing.assert_array_equal(i, brute)
        np.testing.assert_array_equal(v, np.take_along_axis(sims, brute, axis=1))


@pytest.mark.parametrize("code", ["solution", "heapq"])
def test_clean_room_gives_full_marks_to_honest_answers(code):
    spec = load(NAME)
    source = solution_source(spec) if code == "solution" else HONEST_HEAPQ
    verdicts = verify_source(spec, source, 4242, FAST)
    got = sum(v.points for v in verdicts)
    top = sum(v.max_points for v in verdicts)
    assert top == spec.VISIBLE_POINTS + sum(check_points(c) for c in spec.HIDDEN)
    assert got == top, [v.message for v in verdicts if v.points != v.max_points]


def test_clean_room_agrees_with_in_process_checks_on_a_wrong_answer():
    from autograder.build import grade_ids

    spec = load(NAME)
    verdicts = {v.grade_id: v.points for v in verify_source(spec, ARGSORT_UNSTABLE, 4242, FAST)}
    for check, gid in grade_ids(spec).items():
        want = sum(f.points for f in run_check(check, _fn(ARGSORT_UNSTABLE), 4242))
        assert verdicts[gid] == pytest.approx(want), check


def test_committed_notebooks_exist_and_match_the_spec():
    spec = load(NAME)
    assert notebook_path(spec).read_text() == notebook_text(build_notebook(spec))
    assert notebook_path(spec, directory="exercises").exists()

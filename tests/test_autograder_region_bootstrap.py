"""The graded exercise ``region_bootstrap_miou`` (book/encoders.md), end to end.

The reference solution scores full marks for several grading seeds, in this process and
in the clean room; an honest answer written differently (pandas group sums, a loop over
the replicates, NaN-aware means) scores full marks too; each classic mistake loses
exactly the checks it should, with feedback that names it.
"""

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

NAME = "region_bootstrap_miou"
SEEDS = (1, 77, 4242)
FAST = {"call_s": 10.0, "start_s": 40.0, "cpu_s": 40, "memory_bytes": 2 << 30}

HONEST_PANDAS = """
import numpy as np
import pandas as pd


def region_bootstrap_miou(counts, regions, n_boot, rng, level=0.95):
    c = np.asarray(counts, dtype=np.float64)
    n, _, k = c.shape
    frame = pd.DataFrame(c.reshape(n, 2 * k))
    frame["region"] = np.asarray(regions)
    sums = frame.groupby("region", sort=True).sum().to_numpy().reshape(-1, 2, k)
    r = sums.shape[0]
    weights = rng.multinomial(r, np.full(r, 1 / r), size=n_boot)
    values = []
    for w in weights:                                 # one replicate at a time
        tot = (w[:, None, None] * sums).sum(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            values.append(np.nanmean(tot[0] / tot[1]))
    with np.errstate(invalid="ignore", divide="ignore"):
        whole = np.nanmean(c[:, 0].sum(0) / c[:, 1].sum(0))
    lo, hi = np.quantile(values, [(1 - level) / 2, (1 + level) / 2])
    return float(whole), float(lo), float(hi)
"""

# each wrong answer differs from the solution in one idea
TILE_BOOTSTRAP = """
import numpy as np


def region_bootstrap_miou(counts, regions, n_boot, rng, level=0.95):
    c = np.asarray(counts, dtype=float)
    n = len(c)
    w = rng.multinomial(n, np.full(n, 1 / n), size=n_boot)      # tiles, not regions
    t = np.einsum("bn,nik->bik", w, c)
    present = t[:, 1] > 0
    vals = np.where(present, t[:, 0] / np.where(present, t[:, 1], 1), 0).sum(1) / present.sum(1)
    whole = c.sum(0)
    ok = whole[1] > 0
    lo, hi = np.percentile(vals, [100 * (1 - level) / 2, 100 * (1 + level) / 2])
    return float((whole[0][ok] / whole[1][ok]).mean()), float(lo), float(hi)
"""

PER_TILE_MEAN = """
import numpy as np


def _miou(t):
    present = t[..., 1, :] > 0
    r = np.divide(t[..., 0, :], t[..., 1, :], out=np.zeros(t[..., 0, :].shape), where=present)
    return r.sum(-1) / present.sum(-1)


def region_bootstrap_miou(counts, regions, n_boot, rng, level=0.95):
    c = np.asarray(counts, dtype=float)
    ids, inv = np.unique(regions, return_inverse=True)
    per = np.zeros((len(ids),) + c.shape[1:])
    np.add.at(per, inv, c)
    w = rng.multinomial(len(ids), np.full(len(ids), 1 / len(ids)), size=n_boot)
    vals = _miou(np.einsum("br,rik->bik", w, per))
    lo, hi = np.percentile(vals, [100 * (1 - level) / 2, 100 * (1 + level) / 2])
    return float(np.mean(_miou(c))), float(lo), float(hi)     # mean of the tiles' mIoUs
"""

BINCOUNT_REGIONS = """
import numpy as np


def _miou(t):
    present = t[..., 1, :] > 0
    r = np.divide(t[..., 0, :], t[..., 1, :], out=np.zeros(t[..., 0, :].shape), where=present)
    return r.sum(-1) / present.sum(-1)


def region_bootstrap_miou(counts, regions, n_boot, rng, level=0.95):
    c = np.asarray(counts, dtype=float)
    regions = np.asarray(regions)
    R = regions.max() + 1                                      # ids read as indices
    per = np.zeros((R,) + c.shape[1:])
    np.add.at(per, regions, c)
    w = rng.multinomial(R, np.full(R, 1 / R), size=n_boot)
    t = np.einsum("br,rik->bik", w, per)
    keep = t[:, 1].sum(1) > 0
    vals = _miou(t[keep])
    lo, hi = np.percentile(vals, [100 * (1 - level) / 2, 100 * (1 + level) / 2])
    return float(_miou(c.sum(0))), float(lo), float(hi)
"""

ZEROS_COUNTED = """
import numpy as np


def region_bootstrap_miou(counts, regions, n_boot, rng, level=0.95):
    c = np.asarray(counts, dtype=float)
    ids, inv = np.unique(regions, return_inverse=True)
    per = np.zeros((len(ids),) + c.shape[1:])
    np.add.at(per, inv, c)
    w = rng.multinomial(len(ids), np.full(len(ids), 1 / len(ids)), size=n_boot)
    t = np.einsum("br,rik->bik", w, per)
    vals = np.divide(t[:, 0], t[:, 1], out=np.zeros(t[:, 0].shape), where=t[:, 1] > 0).mean(1)
    whole = c.sum(0)
    lo, hi = np.percentile(vals, [100 * (1 - level) / 2, 100 * (1 + level) / 2])
    return float(np.mean(whole[0][whole[1] > 0] / whole[1][whole[1] > 0])), float(lo), float(hi)
"""

CHOICE_LOOP = """
import numpy as np


def region_bootstrap_miou(counts, regions, n_boot, rng, level=0.95):
    c = np.asarray(counts, dtype=float)
    ids, inv = np.unique(regions, return_inverse=True)
    per = np.zeros((len(ids),) + c.shape[1:])
    np.add.at(per, inv, c)

    def miou(t):
        ok = t[1] > 0
        return np.mean(t[0][ok] / t[1][ok])

    vals = [miou(per[rng.choice(len(ids), len(ids))].sum(0)) for _ in range(n_boot)]
    lo, hi = np.percentile(vals, [100 * (1 - level) / 2, 100 * (1 + level) / 2])
    return float(miou(c.sum(0))), float(lo), float(hi)
"""

WRONG = {
    "tile_bootstrap": (
        TILE_BOOTSTRAP,
        {"matches_reference", "absent_classes", "single_multinomial_call"},
        "resamples tiles",
    ),
    "per_tile_mean": (
        PER_TILE_MEAN,
        {"matches_reference", "absent_classes"},
        "average of the tiles' own mIoUs",
    ),
    "bincount_regions": (BINCOUNT_REGIONS, {"regions_not_contiguous"}, "np.unique(regions)"),
    "zeros_counted": (ZEROS_COUNTED, {"absent_classes"}, "counted the class as IoU 0"),
    "choice_loop": (
        CHOICE_LOOP,
        {"matches_reference", "absent_classes", "single_multinomial_call"},
        "rng.multinomial(R",
    ),
}


def _fn(source):
    return answer_function(source, NAME)


def _scores(fn, seed):
    return scores(NAME, fn, seed)


@pytest.mark.parametrize("source", ["solution", "pandas"])
def test_reference_and_honest_alternative_score_full_marks(source):
    code = solution_source(load(NAME)) if source == "solution" else HONEST_PANDAS
    assert_full_marks(NAME, code, SEEDS)


@pytest.mark.parametrize("variant", sorted(WRONG))
def test_each_mistake_loses_exactly_its_checks_and_is_named(variant):
    source, failing, words = WRONG[variant]
    assert_loses_exactly(NAME, source, failing, words, SEEDS[:2])


def test_wrong_answers_score_below_the_reference():
    assert_below_reference(NAME, [source for source, _, _ in WRONG.values()])


def test_mutating_answer_loses_only_properties():
    right = _fn(solution_source(load(NAME)))

    def region_bootstrap_miou(counts, regions, n_boot, rng, level=0.95):
        out = right(counts, regions, n_boot, rng, level)
        if level != 0.95:
            regions[0] = regions[0] + 1  # scribbles on a non-default path only
        return out

    scores = _scores(region_bootstrap_miou, 3)
    for aspect, (got, report) in scores.items():
        want = 0 if aspect == "properties" else check_points(f"{NAME}/{aspect}")
        assert got == want, report
    assert "level = 0.8" in scores["properties"][1]


@pytest.mark.parametrize("code", ["solution", "pandas"])
def test_clean_room_gives_full_marks_to_honest_answers(code):
    spec = load(NAME)
    source = solution_source(spec) if code == "solution" else HONEST_PANDAS
    verdicts = verify_source(spec, source, 4242, FAST)
    got = sum(v.points for v in verdicts)
    top = sum(v.max_points for v in verdicts)
    assert top == spec.VISIBLE_POINTS + sum(check_points(c) for c in spec.HIDDEN)
    assert got == top, [v.message for v in verdicts if v.points != v.max_points]


def test_clean_room_agrees_with_in_process_checks_on_a_wrong_answer():
    spec = load(NAME)
    verdicts = {v.grade_id: v.points for v in verify_source(spec, ZEROS_COUNTED, 4242, FAST)}
    from autograder.build import grade_ids

    for check, gid in grade_ids(spec).items():
        want = sum(f.points for f in run_check(check, _fn(ZEROS_COUNTED), 4242))
        assert verdicts[gid] == pytest.approx(want), check


def test_committed_notebooks_exist_and_match_the_spec():
    spec = load(NAME)
    path = notebook_path(spec)
    assert path.read_text() == notebook_text(build_notebook(spec))
    assert notebook_path(spec, directory="exercises").exists()

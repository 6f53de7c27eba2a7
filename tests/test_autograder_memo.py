"""The checks' remembered reference answers (autograder/checks/_memo.py)."""

import numpy as np
import pytest

from autograder.checks._memo import key_of, remembered


def test_keys_tell_apart_what_a_reference_could_tell_apart():
    a = np.arange(6, dtype=float)
    same = [key_of(a), key_of(a.copy()), key_of(np.arange(6.0))]
    assert len(set(same)) == 1
    different = [
        key_of(a),
        key_of(a.astype(np.float32)),  # dtype
        key_of(a.reshape(2, 3)),  # shape
        key_of(a + 1e-12),  # one ulp-scale change of the values
        key_of(list(a)),  # a list of floats is not an array
        key_of(tuple(a)),  # nor is a tuple a list
        key_of(a, seed=0),  # keywords count
        key_of(a, seed=1),
        key_of(a, 0),  # a positional 0 is not seed=0
        key_of(a, 0.0),  # 0.0 is not 0
        key_of(a, True),  # nor is True 1
    ]
    assert len(set(different)) == len(different)
    # a non-contiguous view keys like its contiguous copy
    b = np.arange(12.0).reshape(3, 4)[:, ::2]
    assert key_of(b) == key_of(np.ascontiguousarray(b))


def test_unkeyable_arguments_raise_type_error():
    with pytest.raises(TypeError):
        key_of(object())


def test_a_remembered_reference_runs_once_per_input_and_hands_out_copies():
    calls = []

    @remembered
    def grid(x, cs, seed=0):
        calls.append(seed)
        return np.asarray(x, float) * seed, [float(c) for c in cs]

    x = np.ones(3)
    first = grid(x, [0.1, 1.0], seed=2)
    first[0][:] = -5.0  # a check (or a student) changes what it was given
    first[1].append(99.0)
    again = grid(x.copy(), [0.1, 1.0], seed=2)
    assert calls == [2]
    np.testing.assert_array_equal(again[0], [2.0, 2.0, 2.0])
    assert again[1] == [0.1, 1.0]
    grid(x, [0.1, 1.0], seed=3)
    assert calls == [2, 3]
    assert grid.cache_len() == 2
    grid.cache_clear()
    grid(x, [0.1, 1.0], seed=2)
    assert calls == [2, 3, 2]


def test_unkeyable_calls_run_every_time_and_the_store_is_bounded():
    calls = []

    @remembered(size=2)
    def f(x):
        calls.append(x)
        return 0

    marker = object()
    f(marker)
    f(marker)
    assert calls == [marker, marker]
    for v in (1, 2, 3):
        f(v)
    assert f.cache_len() == 2
    f(1)  # pushed out by 2 and 3: computed again
    assert calls[-1] == 1 and len(calls) == 6


@pytest.mark.parametrize("size", [0, -1, 2.0, None])
def test_bad_size(size):
    with pytest.raises(ValueError, match="size"):
        remembered(lambda x: x, size=size)


@pytest.mark.slow
def test_the_linear_probe_checks_grade_the_same_with_remembered_references():
    """The check's verdicts for a right and a wrong answer are the same whether the
    reference's answers come from the store or are computed afresh."""
    from autograder.checks import linear_probe_done_right as lp
    from autograder.checks import run_check
    from repeval_ref import linear_probe_done_right as right

    def tuned_on_test(htr, ytr, hte, yte, Cs, seed=0):
        from repeval_ref.linear_probe import probe_accuracy_grid

        _, test = probe_accuracy_grid(htr, ytr, hte, yte, Cs, seed=seed)
        best = int(np.argmax(test))
        return float(Cs[best]), float(test[best])

    def verdicts():
        return [
            [(f.name, f.points, f.message) for f in run_check(c, fn, 7)]
            for fn in (right, tuned_on_test)
            for c in ("linear_probe_done_right/recipe",)
        ]

    lp._grid.cache_clear()
    lp._ref.cache_clear()
    fresh = verdicts()
    assert lp._grid.cache_len() > 0
    assert verdicts() == fresh
    assert sum(p for _, p, _ in fresh[0]) == 3
    assert sum(p for _, p, _ in fresh[1]) < 3

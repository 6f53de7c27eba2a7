"""The cosine learning-rate schedule, bit for bit against the formula written out by hand.

The forms its callers need: the factor clamped at the end of the steps (the probe grid and
the probe's LambdaLR), a learning rate times the factor (the attentive probe and
fine-tuning), and a linear warm-up over a share of the steps (the zoo's training).
"""

import math

import pytest
import torch

from repeval_ref.torch.schedule import cosine_factor, cosine_schedule


def clamped_cosine(step, total):
    return 0.5 * (1.0 + math.cos(math.pi * min(step, total) / total))


def cosine_lr(lr, step, steps):
    return lr * 0.5 * (1 + math.cos(math.pi * step / steps))


def warmup_cosine(step, total, warmup):  # warmup: a share of the steps
    w = max(1, int(round(warmup * total)))
    if step < w:
        return (step + 1) / w
    return 0.5 * (1 + math.cos(math.pi * (step - w) / max(1, total - w)))


TOTALS = [1, 2, 3, 7, 10, 97, 100, 235, 1000, 4687]
LRS = [1e-3, 3e-3, 5e-4, 1e-2, 0.1, 1.5e-3, 2e-3, 1 / 3]


@pytest.mark.parametrize("total", TOTALS)
def test_without_warmup_equals_the_clamped_cosine_bit_for_bit(total):
    for step in range(total + 3):  # past the end too: min(step, total) keeps the factor at 0
        assert cosine_factor(step, total) == clamped_cosine(step, total)


@pytest.mark.parametrize("total", TOTALS)
def test_learning_rates_equal_the_written_out_formula_bit_for_bit(total):
    for lr in LRS:
        for step in range(total):  # those loops run steps 0 .. total - 1
            assert lr * cosine_factor(step, total) == cosine_lr(lr, step, total)


@pytest.mark.parametrize("total", TOTALS)
@pytest.mark.parametrize("share", [0.0, 0.05, 0.1, 0.5, 1.0])
def test_with_warmup_equals_the_warmup_formula_bit_for_bit(total, share):
    w = max(1, int(round(share * total)))  # as zoo/train.py converts its share into steps
    for step in range(total):
        for lr in LRS:
            assert lr * cosine_factor(step, total, w) == lr * warmup_cosine(step, total, share)


def test_shape_of_the_schedule():
    assert (
        cosine_factor(0, 10) == 1.0
        and cosine_factor(10, 10) == 0.0
        and cosine_factor(50, 10) == 0.0
    )
    assert cosine_factor(5, 10) == pytest.approx(0.5)
    ramp = [cosine_factor(s, 10, warmup=4) for s in range(4)]
    assert ramp == [0.25, 0.5, 0.75, 1.0]
    assert cosine_factor(4, 10, warmup=4) == 1.0  # the cosine starts where the ramp ends


def test_lambda_lr_follows_the_factor():
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.3)
    sched = cosine_schedule(opt, 7)
    seen = []
    for _ in range(9):
        seen.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert seen == [0.3 * clamped_cosine(s, 7) for s in range(9)]


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(step=-1, total=3), "step"),
        (dict(step=0, total=0), "total"),
        (dict(step=0, total=3, warmup=4), "warmup"),
        (dict(step=0, total=3, warmup=-1), "warmup"),
    ],
)
def test_bad_arguments_name_themselves(kwargs, name):
    with pytest.raises(ValueError, match=name):
        cosine_factor(**kwargs)


def test_cosine_schedule_checks_its_arguments():
    with pytest.raises(ValueError, match="optimizer"):
        cosine_schedule("sgd", 3)
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
    with pytest.raises(ValueError, match="total"):
        cosine_schedule(opt, 0)

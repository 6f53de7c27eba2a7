"""The zoo's training floors, checked on the shipped weights (nothing is retrained).

The floor says a training worked: a trained encoder's linear probe (class token; a
CNN's global average) and its 10-shot probe each at least 10 points above those of the
random initialisation of its own architecture, under the zoo table's protocol
(:data:`repeval_ref.zoo.table.TABLE_PROTOCOL`: 10,000 seeded training rows, all 10,000
test images). The fast tests read the committed table and the floors recorded in it;
the slow one recomputes the probes the floors read from the shipped weights' features
and compares them with the table.
"""

import json
import os

import numpy as np
import pytest

from repeval_ref import zoo
from repeval_ref.zoo import table as zt
from repeval_ref.zoo.registry import ENCODERS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TABLE = os.path.join(ROOT, "benchmarks", "results", "zoo_table.json")

#: Trained encoders held to the floor: every one but the random initialisations and the
#: deliberately collapsed control.
TRAINED = [
    n for n, spec in ENCODERS.items() if spec["objective"] not in ("random_init", "collapsed")
]

#: Encoders measured below the floor on the shipped weights: a randomly initialised
#: ResNet with BatchNorm is already a strong feature map on Fashion-MNIST (its probe
#: 77.7 %), and the label-free objectives, trained for the budget's 10 (SimCLR) and 8
#: (DINO) epochs, add 6 and 4 points to it; MAE misses by 0.2 points. Nothing was tuned
#: after this was seen; a longer training (a device run) is what would test it.
BELOW_FLOOR = {
    "simclr_resnet": "SimCLR on the ResNet: about +6 points on the probe at the budget's 10 epochs",
    "dino_resnet": "DINO on the ResNet: about +4 points on the probe at the budget's 8 epochs",
    "mae_vit": (
        "MAE on the ViT: +9.8 points on the class-token probe (linear probing is MAE's weak spot)"
    ),
}


def _table():
    with open(TABLE) as fh:
        return json.load(fh)


def _params():
    return [
        pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=BELOW_FLOOR[n]))
        if n in BELOW_FLOOR
        else n
        for n in TRAINED
    ]


def test_the_committed_table_holds_every_encoder_under_the_table_protocol():
    t = _table()
    assert t["protocol"] == zt.resolve_protocol()
    assert [r["name"] for r in t["rows"]] == zt.row_names()
    assert t["floors"] == zt.floors(t)
    assert [f["name"] for f in t["floors"]] == TRAINED


@pytest.mark.parametrize("name", _params())
def test_the_committed_table_puts_each_trained_encoder_above_its_floor(name):
    (check,) = [f for f in _table()["floors"] if f["name"] == name]
    assert check["random"] == f"random_{ENCODERS[name]['arch']}"
    assert check["probe"]["difference"] >= 0.10 - 1e-9, check["probe"]
    assert check["fewshot10"]["difference"] >= 0.10 - 1e-9, check["fewshot10"]
    assert check["verdict"] == "pass"


#: every row the floors read: the trained encoders and the random initialisation of each
#: of their architectures
FLOOR_ROWS = TRAINED + sorted({f"random_{ENCODERS[n]['arch']}" for n in TRAINED})


def _standardised(htr, hte, keep):
    from repeval_ref.linear_probe import _standardiser

    mean, std = _standardiser(htr[:, keep], "the training rows")
    return (htr[:, keep] - mean) / std, (hte[:, keep] - mean) / std


@pytest.mark.slow  # features of 20,000 images, a probe and five 10-shot searches per row
@pytest.mark.recompute
@pytest.mark.parametrize("name", FLOOR_ROWS)
def test_the_shipped_weights_reproduce_the_tables_probes(name, record_property):
    """The two probes the floors read, recomputed from the shipped weights, agree with the
    committed table on any machine (the floors themselves are checked on the committed
    table above, so a recomputation cannot turn a recorded miss into a pass).

    Each choice is pinned to the table's (the probe's ``C``; each 10-shot draw's ``C``)
    and must be the recomputed choice or as good within its validation or out-of-fold
    noise; each accuracy given its choice must lie within three binomial standard errors
    of the paired disagreement that reversing the order of the fitting rows produces
    (``tests/helpers/reproduce.py``). The probe's accuracy is the warm path's of the
    table when the recomputed path chooses the table's ``C``, otherwise a cold fit with
    it; both fits' predictions count in the reach.
    """
    from helpers import reproduce
    from sklearn.preprocessing import StandardScaler

    from repeval_ref.linear_probe import linear_probe_warm_path

    p = zt.resolve_protocol()
    tr = zt.subset_indices(60000, p["train"], p["subset_seed"])
    te = zt.subset_indices(10000, p["test"], p["subset_seed"] + 1)
    (row,) = [r for r in _table()["rows"] if r["name"] == name]
    htr, ytr = zoo.features(name, "train", "cls", indices=tr)
    hte, yte = zoo.features(name, "test", "cls", indices=te)

    # the probe: columns kept and split as the table's (zoo.table._probe)
    cell = row["probe_cls"]
    keep = (
        htr[np.random.default_rng(0).permutation(htr.shape[0])[htr.shape[0] // 5 :]].std(axis=0) > 0
    )
    correct = reproduce.validation_correct(htr[:, keep], ytr, p["Cs"], 0)
    assert reproduce.choice_within_noise(correct, cell["C"], reproduce.first_best(correct)), (
        name,
        "probe C",
    )
    train_z, test_z = _standardised(htr, hte, keep)
    cold = reproduce.probe_predictions(train_z, ytr, test_z, cell["C"])
    best_c, _, warm = linear_probe_warm_path(htr[:, keep], ytr, hte[:, keep], yte, p["Cs"], seed=0)
    fits = (*cold, warm) if best_c == cell["C"] else cold
    allowed = reproduce.allowed_difference(reproduce.reach(*fits), yte.size)
    table_like = warm if best_c == cell["C"] else cold[0]  # the table's path when it applies
    reproduce.assert_within(
        record_property, f"zoo_table/probe/{name}", np.mean(table_like == yte), cell["acc"], allowed
    )

    # the 10-shot probe, draw by draw (zoo.table.fewshot_probe)
    f = p["fewshot"]
    cell = row["fewshot10"]
    assert cell["acc"] == pytest.approx(np.mean(cell["draws"]), abs=1e-12)
    supports = zt.fewshot_supports(ytr, f["shots"], f["draws"], f["seed"])
    for i, (support, C, committed) in enumerate(zip(supports, cell["C"], cell["draws"])):
        hs, ys = htr[support], ytr[support]
        correct = reproduce.out_of_fold_correct(hs, ys, f["Cs"], f["folds"])
        assert reproduce.choice_within_noise(correct, C, reproduce.first_best(correct)), (
            name,
            "draw",
            i,
        )
        scaler = StandardScaler().fit(hs)  # the search's pipeline, refitted on the support
        fits = reproduce.probe_predictions(scaler.transform(hs), ys, scaler.transform(hte), C)
        allowed = reproduce.allowed_difference(reproduce.reach(*fits), yte.size)
        reproduce.assert_within(
            record_property,
            f"zoo_table/fewshot10/{name}:draw{i}",
            np.mean(fits[0] == yte),
            committed,
            allowed,
        )

"""Issue 26's training floors, checked on the shipped weights (nothing is retrained).

The floor says a training worked: a trained encoder's linear probe (class token; a
CNN's global average) and its 10-shot probe each at least 10 points above those of the
random initialisation of its own architecture, under the zoo table's protocol
(:data:`repeval_ref.zoo.table.TABLE_PROTOCOL`: 10,000 seeded training rows, all 10,000
test images). The fast tests read the committed table and the floors recorded in it;
the slow one recomputes both probes from the shipped weights' features and compares
them with the table and with the floor.
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
TRAINED = [n for n, spec in ENCODERS.items()
           if spec["objective"] not in ("random_init", "collapsed")]

#: Encoders measured below the floor on the shipped weights (issue 26 stays open for
#: them): a randomly initialised ResNet with BatchNorm is already a strong feature map on
#: Fashion-MNIST (its probe 77.7 %), and the label-free objectives, trained for the
#: budget's 10 (SimCLR) and 8 (DINO) epochs, add 6 and 4 points to it; MAE misses by 0.2 points. Nothing was
#: tuned after this was seen; a longer training (a device run) is what would test it.
BELOW_FLOOR = {
    "simclr_resnet": "SimCLR on the ResNet: about +6 points on the probe at the budget's 10 epochs",
    "dino_resnet": "DINO on the ResNet: about +4 points on the probe at the budget's 8 epochs",
    "mae_vit": "MAE on the ViT: +9.8 points on the class-token probe (linear probing is MAE's weak spot)",
}


def _table():
    with open(TABLE) as fh:
        return json.load(fh)


def _params():
    return [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=BELOW_FLOOR[n]))
            if n in BELOW_FLOOR else n for n in TRAINED]


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


def _probes(name, p, tr, te):
    htr, ytr = zoo.features(name, "train", "cls", indices=tr)
    hte, yte = zoo.features(name, "test", "cls", indices=te)
    return zt._probe(htr, ytr, hte, yte, p)["acc"], zt.fewshot_probe(htr, ytr, hte, yte, p)["acc"]


@pytest.mark.slow  # features of 20,000 images and two probes for every trained encoder
@pytest.mark.parametrize("name", _params())
def test_the_shipped_weights_clear_the_floor(name):
    """Both probes recomputed from the shipped weights agree with the committed table (to
    ten of the 10,000 test images: L-BFGS sums through the BLAS kernel the processor gets,
    which can move a prediction near a boundary) and clear the floor."""
    p = zt.resolve_protocol()
    tr = zt.subset_indices(60000, p["train"], p["subset_seed"])
    te = zt.subset_indices(10000, p["test"], p["subset_seed"] + 1)
    rows = {r["name"]: r for r in _table()["rows"]}
    random_name = f"random_{ENCODERS[name]['arch']}"
    got = {n: _probes(n, p, tr, te) for n in (name, random_name)}
    for n, (probe, fewshot) in got.items():
        assert probe == pytest.approx(rows[n]["probe_cls"]["acc"], abs=1e-3), n
        assert fewshot == pytest.approx(rows[n]["fewshot10"]["acc"], abs=1e-3), n
    assert np.subtract(got[name], got[random_name]).min() >= 0.10 - 1e-9, got

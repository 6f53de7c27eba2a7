"""The zoo: losses with known answers, determinism, shipped weights and their manifest, bad
input."""

import math
import os
import shutil

import numpy as np
import pytest
import torch
from scipy.special import log_softmax, softmax

from repeval_ref import attentive_probe, rankme, zoo
from repeval_ref.zoo import augment, collapsed, dino, mae, simclr, supervised
from repeval_ref.zoo.build import WEIGHTS_DIR, sha256_file
from repeval_ref.zoo.registry import ENCODERS

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(autouse=True)
def one_blas_thread():
    """scikit-learn's probe on one BLAS thread: spinning pool threads crawl on a busy machine."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        yield


# ----------------------------------------------------------------------------- losses


@pytest.mark.parametrize("b,tau", [(2, 0.5), (5, 0.2), (8, 1.0)])
def test_info_nce_of_identical_orthogonal_views_is_the_closed_form(b, tau):
    z = (
        torch.eye(8, dtype=torch.float64)[:b] * 3.0
    )  # identical views, rows orthogonal to each other
    expected = math.log(math.exp(1 / tau) + 2 * b - 2) - 1 / tau
    assert simclr.info_nce(z, z.clone(), tau).item() == pytest.approx(expected, rel=1e-12)


def test_info_nce_matches_a_loop_over_anchors():
    g = torch.Generator().manual_seed(0)
    z1, z2 = (
        torch.randn(6, 5, generator=g, dtype=torch.float64),
        torch.randn(6, 5, generator=g, dtype=torch.float64),
    )
    z = torch.nn.functional.normalize(torch.cat([z1, z2]), dim=1).numpy()
    total = 0.0
    for i in range(12):
        pos = (i + 6) % 12
        s = z @ z[i] / 0.3
        others = [j for j in range(12) if j != i]
        total += -s[pos] + np.log(np.sum(np.exp(s[others])))
    assert simclr.info_nce(z1, z2, 0.3).item() == pytest.approx(total / 12, rel=1e-10)


def test_masked_loss_ignores_visible_patches_and_averages_hidden_ones():
    g = torch.Generator().manual_seed(1)
    pred, target = torch.randn(3, 16, 49, generator=g), torch.randn(3, 16, 49, generator=g)
    keep, mask = mae.random_mask(3, 16, 0.75, g)
    assert keep.shape == (3, 4) and mask.sum().item() == 36
    loss = mae.masked_reconstruction_loss(pred, target, mask)
    changed = target.clone()
    changed[mask == 0] += 100.0  # perturb only the visible patches' targets
    assert mae.masked_reconstruction_loss(pred, changed, mask).item() == loss.item()
    brute = np.mean(
        [
            ((pred[i, j] - target[i, j]) ** 2).mean().item()
            for i in range(3)
            for j in range(16)
            if mask[i, j] == 1
        ]
    )
    assert loss.item() == pytest.approx(brute, rel=1e-5)


def test_patchify_is_row_major_like_the_patch_embedding():
    x = torch.arange(2 * 28 * 28, dtype=torch.float32).reshape(2, 1, 28, 28)
    p = mae.patchify(x, 7)
    assert p.shape == (2, 16, 49)
    assert torch.equal(p[1, 5], x[1, 0, 7:14, 7:14].reshape(-1))  # patch (row 1, column 1)


def test_dino_loss_closed_form_and_no_gradient_into_the_teacher():
    rng = np.random.default_rng(0)
    s, t, c = rng.normal(size=(4, 7)), rng.normal(size=(4, 7)), rng.normal(size=7)
    expected = -np.mean(
        np.sum(softmax((t - c) / 0.04, axis=1) * log_softmax(s / 0.1, axis=1), axis=1)
    )
    st = torch.tensor(s, requires_grad=True)
    tt = torch.tensor(t, requires_grad=True)
    loss = dino.dino_loss(st, tt, torch.tensor(c), 0.1, 0.04)
    assert loss.item() == pytest.approx(expected, rel=1e-10)
    loss.backward()
    assert tt.grad is None and st.grad is not None


def test_cross_entropy_and_negative_cosine_known_values():
    logits = torch.tensor([[0.0, math.log(3.0)], [2.0, 2.0]])
    y = torch.tensor([1, 0])
    assert supervised.cross_entropy(logits, y).item() == pytest.approx(
        (math.log(4 / 3) + math.log(2)) / 2
    )
    z = torch.randn(5, 3)
    assert collapsed.negative_cosine(z, 2 * z).item() == pytest.approx(-1.0)
    assert collapsed.negative_cosine(z, -z).item() == pytest.approx(1.0)


def test_trainable_attentive_probe_matches_the_reference_forward():
    torch.manual_seed(0)
    from repeval_ref.zoo.probes import AttentiveProbe

    probe = AttentiveProbe(8, 3, n_heads=2, n_prefix=1)
    with torch.no_grad():
        probe.W_cls.normal_()
    H = torch.randn(5, 6, 8)
    logits, A = probe(H)
    ref_logits, ref_A = attentive_probe(
        H.numpy(),
        probe.q.detach().numpy(),
        probe.Wk.detach().numpy(),
        probe.Wv.detach().numpy(),
        probe.Wo.detach().numpy(),
        probe.W_cls.detach().numpy(),
        2,
        n_prefix=1,
    )
    np.testing.assert_allclose(logits.detach().numpy(), ref_logits, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(A.detach().numpy(), ref_A, rtol=1e-4, atol=1e-6)


def test_augmentations_are_seeded_and_full_crop_is_identity_or_mirror():
    x = torch.randn(6, 1, 28, 28)
    a = augment.random_view(x, torch.Generator().manual_seed(3))
    b = augment.random_view(x, torch.Generator().manual_seed(3))
    assert torch.equal(a, b) and a.shape == x.shape
    v = augment.random_view(
        x, torch.Generator().manual_seed(4), scale=(1, 1), ratio=(1, 1), jitter=0, noise=0
    )
    for i in range(6):
        assert torch.allclose(v[i], x[i], atol=1e-5) or torch.allclose(
            v[i], x[i].flip(2), atol=1e-5
        )
    with pytest.raises(ValueError, match="x must be"):
        augment.random_view(torch.zeros(28, 28), torch.Generator())


# ----------------------------------------------------------------------------- determinism


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.slow) if n != "mae_vit" else n
        for n in ["supervised_cnn", "simclr_vit", "dino_vit", "mae_vit", "collapsed_vit"]
    ],
)
def test_one_epoch_of_retraining_twice_is_bit_identical(name):
    from repeval_ref.datasets import fashion_mnist
    from repeval_ref.zoo.train import train_encoder

    x, y = fashion_mnist("train")
    try:
        runs = [train_encoder(name, x, y, epochs=1, n_images=512) for _ in range(2)]
    finally:
        torch.use_deterministic_algorithms(False)
    (_, _, _, a), (_, _, _, b) = runs[0]["checkpoints"][-1], runs[1]["checkpoints"][-1]
    assert runs[0]["curve"] == runs[1]["curve"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    first = runs[0]["checkpoints"][0][3]  # and training moved the weights
    start = zoo.registry.build_encoder(ENCODERS[name]["arch"]).state_dict()
    assert any(not torch.equal(first[k], start[k]) for k in start if start[k].is_floating_point())


# ----------------------------------------------------------------------------- shipped weights


def _manifest():
    return zoo.manifest()


def test_manifest_checksums_match_the_files_and_weights_fit_the_budget():
    m = _manifest()
    assert set(m["encoders"]) == set(ENCODERS)
    total = 0
    for name, entry in m["encoders"].items():
        assert entry["final"] in entry["checkpoints"]
        for ck, info in entry["checkpoints"].items():
            path = os.path.join(WEIGHTS_DIR, info["file"])
            assert sha256_file(path) == info["sha256"], (name, ck)
            assert os.path.getsize(path) == info["bytes"]
            total += info["bytes"]
        assert (
            entry["training"]["torch"]
            and len(entry["training"]["loss_per_epoch"]) == entry["hyperparameters"]["epochs"]
        )
        assert {"knn20", "probe"} <= set(entry["test"])
    # four checkpoints of every trained encoder ship (they show the plateau); the three
    # ResNets' 0.6 M parameters take 2.4 MB a checkpoint, about 30 MB of the whole
    assert total <= 48 * 2**20
    trained = [n for n, e in m["encoders"].items() if e["hyperparameters"]["epochs"] > 0]
    for name in (
        trained
    ):  # every training's plateau check is recorded (repeval_ref.zoo.evaluate.plateau_evidence)
        assert m["encoders"][name]["plateau"]["verdict"] in ("at its plateau", "still rising"), name


def test_loaded_encoders_are_frozen_and_reject_wrong_image_shapes():
    for name in ENCODERS:
        enc = zoo.load(name)
        assert not enc.training and not any(p.requires_grad for p in enc.parameters())
    vit = zoo.load("mae_vit")
    with pytest.raises(ValueError, match="x has shape"):
        vit(torch.zeros(2, 1, 30, 30))
    with pytest.raises(ValueError, match="x must be"):
        vit(torch.zeros(1, 28, 28))
    with pytest.raises(ValueError, match="x must be"):
        zoo.load("supervised_cnn")(torch.zeros(2, 3, 28, 28))
    from repeval_ref.zoo.extraction import encoder_inputs

    with pytest.raises(ValueError, match="images must be"):
        encoder_inputs("mae_vit", np.zeros((2, 28, 28)))  # float64, not uint8
    with pytest.raises(ValueError, match="images must be"):
        encoder_inputs("mae_vit", np.zeros((2, 1, 28, 28), dtype=np.uint8))


@pytest.mark.slow  # evaluates every shipped checkpoint
@pytest.mark.recompute
def test_shipped_checkpoints_reproduce_the_manifest_accuracies(tmp_path, record_property):
    """Every checkpoint's 20-NN accuracy, and each final checkpoint's probe, on the manifest's
    small subsets (features recomputed from the weights: a fresh cache), on any machine.

    Tolerances (``tests/helpers/reproduce.py``): the probe's ``C`` is pinned to the
    manifest's and must be the recomputed choice or as good within the validation noise;
    each accuracy must lie within three binomial standard errors of the paired
    disagreement that a reordering of the same computation produces (the k-NN with its
    feature columns reversed, the probe with its training rows or its feature columns reversed).
    """
    from helpers import reproduce

    from repeval_ref.knn import knn_classify
    from repeval_ref.linear_probe import _standardiser
    from repeval_ref.zoo import evaluate

    m = _manifest()
    p = evaluate.PROTOCOL["small"]
    k, tau, Cs = evaluate.PROTOCOL["k"], evaluate.PROTOCOL["tau"], evaluate.PROTOCOL["Cs"]
    tr = evaluate.subset_indices(60000, p["train"], p["subset_seed"])
    te = evaluate.subset_indices(10000, p["test"], p["subset_seed"] + 1)
    for name, entry in m["encoders"].items():
        for ck, info in entry["checkpoints"].items():
            htr, ytr = zoo.features(
                name, "train", "cls", checkpoint=ck, indices=tr, cache_dir=tmp_path
            )
            hte, yte = zoo.features(
                name, "test", "cls", checkpoint=ck, indices=te, cache_dir=tmp_path
            )
            knn = knn_classify(htr, ytr, hte, k, tau, 10)
            knn_reordered = knn_classify(htr[:, ::-1], ytr, hte[:, ::-1], k, tau, 10)
            allowed = reproduce.allowed_difference(reproduce.reach(knn, knn_reordered), yte.size)
            reproduce.assert_within(
                record_property,
                f"manifest/knn20/{name}:{ck}",
                np.mean(knn == yte),
                info["small"]["knn20"],
                allowed,
            )
            if ck != entry["final"]:
                continue
            committed_C = info["small"]["probe_C"]
            correct = reproduce.validation_correct(htr, ytr, Cs, evaluate.PROTOCOL["probe_seed"])
            assert reproduce.choice_within_noise(
                correct, committed_C, reproduce.first_best(correct)
            ), (name, ck)
            mean, std = _standardiser(htr, "the training rows")
            probe = reproduce.probe_predictions(
                (htr - mean) / std, ytr, (hte - mean) / std, committed_C
            )
            allowed = reproduce.allowed_difference(reproduce.reach(*probe), yte.size)
            reproduce.assert_within(
                record_property,
                f"manifest/probe/{name}:{ck}",
                np.mean(probe[0] == yte),
                info["small"]["probe"],
                allowed,
            )


def test_feature_poolings_agree_and_cache_is_reused(tmp_path):
    idx = np.arange(40)
    tok, y = zoo.features("simclr_vit", "test", "tokens", indices=idx, cache_dir=tmp_path)
    cls, y2 = zoo.features("simclr_vit", "test", "cls", indices=idx, cache_dir=tmp_path)
    mean, _ = zoo.features("simclr_vit", "test", "mean", indices=idx, cache_dir=tmp_path)
    assert tok.shape == (40, 17, 64) and cls.shape == (40, 64) and np.array_equal(y, y2)
    np.testing.assert_allclose(tok[:, 0], cls, atol=1e-6)
    np.testing.assert_allclose(tok[:, 1:].mean(axis=1), mean, atol=1e-5)
    again, _ = zoo.features("simclr_vit", "test", "cls", indices=idx, cache_dir=tmp_path)
    assert np.array_equal(again, cls)
    cnn, _ = zoo.features("supervised_cnn", "test", "tokens", indices=idx, cache_dir=tmp_path)
    assert cnn.shape == (40, 50, 64)  # global average first, then the 7 x 7 map positions


def test_cluttered_canvas_runs_through_the_vit_with_interpolated_positions(tmp_path):
    h, y = zoo.features(
        "dino_vit", "test", "tokens", dataset="cluttered", indices=np.arange(8), cache_dir=tmp_path
    )
    assert h.shape == (8, 65, 64) and y.shape == (8,) and np.all(np.isfinite(h))


def test_collapsed_model_has_effective_rank_near_one():
    """The collapsed model's embeddings (projector outputs) have RankMe near 1; a working
    contrastive model's class tokens have many times that. RankMe as Garrido et al.: uncentred."""
    from repeval_ref.datasets import fashion_mnist
    from repeval_ref.zoo.inputs import to_tensor

    x = to_tensor(fashion_mnist("test")[0][:2000])
    with torch.no_grad():
        z = zoo.load_head("collapsed_vit", "projector")(zoo.load("collapsed_vit")(x)).numpy()
        h_simclr = zoo.load("simclr_vit")(x).numpy()
    assert rankme(z) < 1.5
    assert rankme(h_simclr) > 10 * rankme(z)


# ----------------------------------------------------------------------------- bad input


def _copy_weights(tmp_path):
    dst = tmp_path / "weights"
    shutil.copytree(WEIGHTS_DIR, dst, ignore=shutil.ignore_patterns("*.lock"))
    return dst


def test_bad_names_and_damaged_files_are_one_line_value_errors(tmp_path):
    cases = []
    with pytest.raises(ValueError, match="unknown zoo encoder|unknown encoder") as e:
        zoo.load("resnet9000")
    cases.append(e)
    with pytest.raises(ValueError, match="no checkpoint 'epoch99'") as e:
        zoo.load("supervised_cnn", checkpoint="epoch99")
    cases.append(e)
    w = _copy_weights(tmp_path)
    info = _manifest()["encoders"]["supervised_cnn"]["checkpoints"]
    ck = sorted(info)[0]
    path = w / info[ck]["file"]
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # truncated
    with pytest.raises(ValueError, match="fails its checksum") as e:
        zoo.load("supervised_cnn", ck, weights_dir=str(w))
    cases.append(e)
    path.write_bytes(data[:100] + bytes([data[100] ^ 1]) + data[101:])  # one flipped bit
    with pytest.raises(ValueError, match="fails its checksum") as e:
        zoo.load("supervised_cnn", ck, weights_dir=str(w))
    cases.append(e)
    path.unlink()
    with pytest.raises(ValueError, match="is missing") as e:
        zoo.load("supervised_cnn", ck, weights_dir=str(w))
    cases.append(e)
    with pytest.raises(ValueError, match="manifest .* is missing") as e:
        zoo.load("supervised_cnn", weights_dir=str(tmp_path / "nowhere"))
    cases.append(e)
    with pytest.raises(ValueError, match="pooling") as e:
        zoo.features("supervised_cnn", "test", pooling="max")
    cases.append(e)
    with pytest.raises(ValueError, match="dataset") as e:
        zoo.features("supervised_cnn", "test", dataset="imagenet")
    cases.append(e)
    with pytest.raises(ValueError, match="indices") as e:
        zoo.features("supervised_cnn", "test", indices=[10**6])
    cases.append(e)
    with pytest.raises(ValueError, match="ships no head") as e:
        zoo.load_head("simclr_vit", "projector")
    cases.append(e)
    for e in cases:
        assert "\n" not in str(e.value)


def test_a_file_with_the_right_checksum_but_wrong_content_is_refused(tmp_path):
    import json

    w = _copy_weights(tmp_path)
    m = json.loads((w / "manifest.json").read_text())
    info = m["encoders"]["supervised_cnn"]["checkpoints"]
    ck = sorted(info)[0]
    bad = w / info[ck]["file"]
    bad.write_bytes(b"not a checkpoint")
    info[ck]["sha256"] = sha256_file(bad)  # a manifest that agrees with the damaged file
    (w / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(ValueError, match="does not load") as e:
        zoo.load("supervised_cnn", ck, weights_dir=str(w))
    assert "\n" not in str(e.value)


def test_the_feature_cache_is_named_after_the_weights_sha256(tmp_path):
    """A new release of the zoo (or another weights folder) writes its features beside the old
    ones instead of finding them stale: the folder carries the checkpoint file's SHA-256."""
    import json
    import warnings

    from repeval_ref.zoo.extraction import cache_model_name, features

    entry = zoo.manifest()["encoders"]["supervised_cnn"]
    final = entry["final"]
    name = cache_model_name("supervised_cnn", None, None)
    assert name == cache_model_name(
        "supervised_cnn", final, None
    )  # the default is the final checkpoint
    assert name == f"supervised_cnn@{final}-{entry['checkpoints'][final]['sha256'][:12]}"
    assert cache_model_name("efficientnet_lite0", None, None) == "efficientnet_lite0@final"
    # another weights folder whose final checkpoint is an earlier file: another cache folder, no
    # warning
    other = tmp_path / "weights"
    (other / "supervised_cnn").mkdir(parents=True)
    first = zoo.checkpoints("supervised_cnn")[0]
    shutil.copy(
        os.path.join(WEIGHTS_DIR, entry["checkpoints"][first]["file"]), other / "supervised_cnn"
    )
    manifest = {
        "format": 1,
        "encoders": {
            "supervised_cnn": dict(
                entry, final=first, checkpoints={first: entry["checkpoints"][first]}
            )
        },
    }
    (other / "manifest.json").write_text(json.dumps(manifest))
    assert cache_model_name("supervised_cnn", None, str(other)) != name
    cache = tmp_path / "cache"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a, _ = features("supervised_cnn", "test", indices=np.arange(64), cache_dir=str(cache))
        b, _ = features(
            "supervised_cnn",
            "test",
            indices=np.arange(64),
            cache_dir=str(cache),
            weights_dir=str(other),
        )
        a2, _ = features("supervised_cnn", "test", indices=np.arange(64), cache_dir=str(cache))
    assert not np.array_equal(a, b) and np.array_equal(a, a2)
    assert len(os.listdir(cache)) == 2  # one folder per set of weights

"""GPU benchmark of the PyTorch reference loop: extraction throughput and exact k-NN at ImageNet
scale.

Measures, in one run, on one CUDA device:

1. the achieved bfloat16 matrix-multiply rate (TFLOP/s), on a large square product and
   on the product shape of one k-NN similarity tile: this is the bound;
2. exact weighted k-NN (:func:`repeval_ref.torch.knn_classify_torch`) of 50,000
   queries against a 1,281,167 x 768 bank (ImageNet-1k's training set at ViT-B width)
   in bfloat16, against the time the bound allows for its ``2 * n_query * n_bank * d``
   FLOPs, plus the time of the similarity products alone;
3. correctness at scale: float32 k-NN on the GPU against the float64 CPU reference on a
   smaller bank (predictions must be equal), and the agreement of bfloat16 with float32;
4. 52 linear probes (13 learning rates x 4 DINOv2 feature views of ViT-B widths) trained
   in one pass with :func:`repeval_ref.torch.train_probe_grid`, against the same 52
   configurations trained one after the other with ``train_probe``, with the largest
   difference in test accuracy between the two;
5. feature-extraction throughput (images/s) of a ViT-B/16-shaped encoder under bf16
   autocast: plain forward passes, and :func:`repeval_ref.torch.extract.extract_features`
   with hooks on the last 4 blocks (class token and mean patch token) fed from a
   DataLoader, with the TFLOP/s these imply.

Results go to a small JSON file (``--out``, default ``gpu_results.json``); each section
is written as soon as it finishes, and a failing section records its error instead of
stopping the run.

Usage::

    python benchmarks/gpu/run_gpu.py                 # on a CUDA machine, full sizes
    python benchmarks/gpu/run_gpu.py --tiny --device cpu   # seconds, on any machine (CI smoke)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import traceback

import numpy as np
import torch

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))

from repeval_ref import knn_classify  # noqa: E402
from repeval_ref.torch import TinyViT, knn_classify_torch  # noqa: E402
from repeval_ref.torch.extract import extract_features  # noqa: E402
from repeval_ref.torch.knn import _unit, topk_neighbors  # noqa: E402

FULL = dict(
    n_bank=1_281_167,
    d=768,
    n_query=50_000,
    k=20,
    tau=0.07,
    n_classes=1000,
    square=8192,
    query_block=8192,
    bank_block=262_144,
    check_bank=100_000,
    check_query=500,
    agree_query=2000,
    img=224,
    patch=16,
    dim=768,
    depth=12,
    heads=12,
    n_images=1024,
    batch=256,
    grid_n=50_000,
    grid_test=10_000,
    grid_d=768,
    grid_classes=1000,
    grid_lrs=13,
    grid_epochs=1,
    grid_batch=1024,
)
TINY = dict(
    n_bank=5000,
    d=64,
    n_query=300,
    k=20,
    tau=0.07,
    n_classes=10,
    square=256,
    query_block=128,
    bank_block=1024,
    check_bank=2000,
    check_query=50,
    agree_query=100,
    img=32,
    patch=8,
    dim=64,
    depth=4,
    heads=4,
    n_images=64,
    batch=16,
    grid_n=600,
    grid_test=200,
    grid_d=8,
    grid_classes=5,
    grid_lrs=3,
    grid_epochs=1,
    grid_batch=64,
)


class Timer:
    """Wall-clock timing that waits for the device (CUDA events would time one stream only)."""

    def __init__(self, device):
        self.device = device

    def sync(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def __call__(self, fn, reps=1, warmup=1):
        for _ in range(warmup):
            fn()
        self.sync()
        t0 = time.perf_counter()
        for _ in range(reps):
            out = fn()
        self.sync()
        return (time.perf_counter() - t0) / reps, out


def matmul_bound(cfg, device, timer):
    dt = torch.bfloat16 if device.type == "cuda" else torch.float32
    n = cfg["square"]
    a = torch.randn(n, n, device=device, dtype=dt)
    b = torch.randn(n, n, device=device, dtype=dt)
    t, _ = timer(lambda: a @ b, reps=20 if device.type == "cuda" else 3, warmup=3)
    square = 2 * n**3 / t / 1e12
    q = torch.randn(cfg["query_block"], cfg["d"], device=device, dtype=dt)
    bank = torch.randn(min(cfg["bank_block"], cfg["n_bank"]), cfg["d"], device=device, dtype=dt)
    t2, _ = timer(lambda: q @ bank.T, reps=10 if device.type == "cuda" else 3, warmup=2)
    tile = 2 * q.shape[0] * bank.shape[0] * cfg["d"] / t2 / 1e12
    return {
        "dtype": str(dt),
        "square_n": n,
        "square_tflops": square,
        "tile_shape": [q.shape[0], cfg["d"], bank.shape[0]],
        "tile_tflops": tile,
    }


def knn_speed(cfg, device, timer, bound_tflops):
    dt = torch.bfloat16 if device.type == "cuda" else torch.float32
    g = torch.Generator(device=device).manual_seed(0)
    bank = torch.randn(cfg["n_bank"], cfg["d"], device=device, dtype=dt, generator=g)
    queries = torch.randn(cfg["n_query"], cfg["d"], device=device, dtype=dt, generator=g)
    labels = torch.randint(
        0, cfg["n_classes"], (cfg["n_bank"],), generator=torch.Generator().manual_seed(0)
    )
    kw = dict(dtype=dt, query_block=cfg["query_block"], bank_block=cfg["bank_block"])
    run = lambda: knn_classify_torch(  # noqa: E731
        bank, labels, queries, cfg["k"], cfg["tau"], cfg["n_classes"], **kw
    )
    t_cold, _ = timer(run, reps=1, warmup=0)
    t, _ = timer(run, reps=3, warmup=0)
    ub, uq = _unit(bank, "bank", dt, device), _unit(queries, "queries", dt, device)

    def products_only():
        for qs in range(0, uq.shape[0], cfg["query_block"]):
            for bs in range(0, ub.shape[0], cfg["bank_block"]):
                uq[qs : qs + cfg["query_block"]] @ ub[bs : bs + cfg["bank_block"]].T

    t_mm, _ = timer(products_only, reps=1, warmup=0)
    t_topk, _ = timer(
        lambda: topk_neighbors(
            ub,
            uq,
            cfg["k"],
            query_block=cfg["query_block"],
            bank_block=cfg["bank_block"],
            exact_ties=False,
        ),
        reps=1,
        warmup=0,
    )
    flops = 2.0 * cfg["n_query"] * cfg["n_bank"] * cfg["d"]
    t_bound = flops / (bound_tflops * 1e12)
    return {
        "n_bank": cfg["n_bank"],
        "d": cfg["d"],
        "n_query": cfg["n_query"],
        "k": cfg["k"],
        "dtype": str(dt),
        "query_block": cfg["query_block"],
        "bank_block": cfg["bank_block"],
        "seconds_total": t,
        "seconds_total_first_call": t_cold,
        "seconds_products_only": t_mm,
        "seconds_topk_search": t_topk,
        "tflop": flops / 1e12,
        "seconds_at_matmul_bound": t_bound,
        "fraction_of_bound_total": t_bound / t,
        "fraction_of_bound_products": t_bound / t_mm,
        "queries_per_second": cfg["n_query"] / t,
    }


def knn_correctness(cfg, device):
    rng = np.random.default_rng(1)
    centers = rng.normal(size=(cfg["n_classes"], cfg["d"]))
    y = rng.integers(0, cfg["n_classes"], cfg["check_bank"])
    bank = (centers[y] + 2.0 * rng.normal(size=(cfg["check_bank"], cfg["d"]))).astype(np.float32)
    yq = rng.integers(0, cfg["n_classes"], cfg["agree_query"])
    queries = (centers[yq] + 2.0 * rng.normal(size=(cfg["agree_query"], cfg["d"]))).astype(
        np.float32
    )
    nq = cfg["check_query"]
    ref = knn_classify(bank, y, queries[:nq], cfg["k"], cfg["tau"], cfg["n_classes"])
    tb, tq = torch.from_numpy(bank).to(device), torch.from_numpy(queries).to(device)
    kw = dict(query_block=cfg["query_block"], bank_block=cfg["bank_block"])
    f64 = knn_classify_torch(
        tb, y, tq[:nq], cfg["k"], cfg["tau"], cfg["n_classes"], dtype=torch.float64, **kw
    )
    f32 = knn_classify_torch(
        tb, y, tq, cfg["k"], cfg["tau"], cfg["n_classes"], dtype=torch.float32, **kw
    )
    low_dt = torch.bfloat16 if device.type == "cuda" else torch.float32
    low = knn_classify_torch(tb, y, tq, cfg["k"], cfg["tau"], cfg["n_classes"], dtype=low_dt, **kw)
    return {
        "bank": cfg["check_bank"],
        "queries_checked": nq,
        "float64_vs_float64_reference_equal_fraction": float((f64 == ref).mean()),
        "float32_vs_float64_reference_equal_fraction": float((f32[:nq] == ref).mean()),
        "low_precision_dtype": str(low_dt),
        "low_precision_vs_float32_agreement": float((low == f32).mean()),
        "float32_accuracy": float((f32 == yq).mean()),
    }


def grid_speed(cfg, device, timer):
    from repeval_ref.torch import grid_accuracies, train_probe, train_probe_grid

    n, n_test, K = cfg["grid_n"], cfg["grid_test"], cfg["grid_classes"]
    g = torch.Generator(device=device).manual_seed(2)
    y_all = torch.randint(0, K, (n + n_test,), device=device, generator=g)
    views = {}
    for name, width in (
        ("last1/cls", 1),
        ("last1/cls+mean", 2),
        ("last4/cls", 4),
        ("last4/cls+mean", 8),
    ):
        d = width * cfg["grid_d"]
        centres = torch.randn(K, d, device=device, generator=g)
        views[name] = centres[y_all] + 4.0 * torch.randn(n + n_test, d, device=device, generator=g)
    train = {k: v[:n] for k, v in views.items()}
    test = {k: v[n:] for k, v in views.items()}
    y, y_test = y_all[:n].cpu(), y_all[n:].cpu()
    lrs = np.logspace(-4, 0, cfg["grid_lrs"]).tolist()
    kw = dict(epochs=cfg["grid_epochs"], batch_size=cfg["grid_batch"], seed=0)
    t_grid, (heads, configs) = timer(
        lambda: train_probe_grid(train, y, K, lrs, **kw), reps=1, warmup=1
    )
    acc_grid = grid_accuracies(heads, configs, test, y_test)

    def sequential():
        acc = []
        for c in configs:
            probe = train_probe(train[c["view"]], y, K, lr=c["lr"], **kw)
            with torch.no_grad():
                acc.append(
                    float((probe(test[c["view"]]).argmax(1).cpu() == y_test).double().mean())
                )
        return np.array(acc)

    t_seq, acc_seq = timer(sequential, reps=1, warmup=0)
    return {
        "configurations": len(configs),
        "n_train": n,
        "n_test": n_test,
        "n_classes": K,
        "view_widths": [int(v.shape[1]) for v in train.values()],
        "epochs": cfg["grid_epochs"],
        "batch": cfg["grid_batch"],
        "tf32_matmul": bool(torch.backends.cuda.matmul.allow_tf32),
        "seconds_grid": t_grid,
        "seconds_sequential": t_seq,
        "speedup": t_seq / t_grid,
        "best_test_accuracy": float(acc_grid.max()),
        "test_accuracy_max_abs_diff": float(np.abs(acc_grid - acc_seq).max()),
    }


def vit_gflop_per_image(img, patch, dim, depth):
    """Forward FLOPs (2 per multiply-add) of a ViT: patch embedding, attention and MLP (ratio 4)."""
    n = (img // patch) ** 2 + 1
    per_block = 12 * n * dim * dim + 2 * n * n * dim
    embed = (n - 1) * 3 * patch * patch * dim
    return 2 * (depth * per_block + embed) / 1e9


def extraction_speed(cfg, device, timer):
    torch.manual_seed(0)
    model = (
        TinyViT(
            image_size=cfg["img"],
            patch_size=cfg["patch"],
            in_channels=3,
            dim=cfg["dim"],
            depth=cfg["depth"],
            heads=cfg["heads"],
            mlp_ratio=4,
        )
        .to(device)
        .eval()
    )
    images = torch.randn(cfg["n_images"], 3, cfg["img"], cfg["img"])
    use_amp = device.type == "cuda"
    batch = images[: cfg["batch"]].to(device)

    def forward_only():
        with torch.no_grad(), torch.autocast(device.type, dtype=torch.bfloat16, enabled=use_amp):
            for _ in range(cfg["n_images"] // cfg["batch"]):
                model(batch)

    t_fwd, _ = timer(forward_only, reps=1, warmup=1)
    layers = [f"blocks.{i}" for i in range(cfg["depth"] - 4, cfg["depth"])]
    t_ext, feats = timer(
        lambda: extract_features(
            model,
            images,
            layers=layers,
            poolings=("cls", "mean"),
            batch_size=cfg["batch"],
            device=device,
            num_workers=2,
        ),
        reps=1,
        warmup=1,
    )
    gflop = vit_gflop_per_image(cfg["img"], cfg["patch"], cfg["dim"], cfg["depth"])
    n_fwd = (cfg["n_images"] // cfg["batch"]) * cfg["batch"]
    return {
        "model": f"ViT img{cfg['img']}/p{cfg['patch']} dim{cfg['dim']} depth{cfg['depth']}",
        "gflop_per_image": gflop,
        "batch": cfg["batch"],
        "autocast_bf16": use_amp,
        "forward_images_per_second": n_fwd / t_fwd,
        "forward_tflops": n_fwd * gflop / t_fwd / 1e3,
        "extract_images_per_second": cfg["n_images"] / t_ext,
        "extract_tflops": cfg["n_images"] * gflop / t_ext / 1e3,
        "extract_feature_dim_last4_cls_mean": int(feats.view(4, "cls+mean").shape[1]),
    }


def knn_tiles(cfg, device, timer):
    """Tile-size sweep of the bfloat16 k-NN, and the cost of one tile's top-k by dtype."""
    dt = torch.bfloat16 if device.type == "cuda" else torch.float32
    g = torch.Generator(device=device).manual_seed(0)
    bank = torch.randn(cfg["n_bank"], cfg["d"], device=device, dtype=dt, generator=g)
    queries = torch.randn(cfg["n_query"], cfg["d"], device=device, dtype=dt, generator=g)
    labels = torch.randint(
        0, cfg["n_classes"], (cfg["n_bank"],), generator=torch.Generator().manual_seed(0)
    )
    qb0, bb0 = cfg["query_block"], cfg["bank_block"]
    sweep = []
    for qb in (qb0 // 2, qb0, qb0 * 2):
        for bb in (bb0 // 4, bb0 // 2, bb0, bb0 * 2):
            t, _ = timer(
                lambda qb=qb, bb=bb: knn_classify_torch(
                    bank,
                    labels,
                    queries,
                    cfg["k"],
                    cfg["tau"],
                    cfg["n_classes"],
                    dtype=dt,
                    query_block=qb,
                    bank_block=bb,
                ),
                reps=1,
                warmup=0,
            )
            sweep.append({"query_block": qb, "bank_block": bb, "seconds": t})
    ub, uq = _unit(bank, "bank", dt, device), _unit(queries[:qb0], "queries", dt, device)
    sims = uq @ ub[:bb0].T
    t_mm, _ = timer(lambda: uq @ ub[:bb0].T, reps=5, warmup=1)
    t_topk, _ = timer(lambda: torch.topk(sims, cfg["k"], dim=1), reps=5, warmup=1)
    t_topk32, _ = timer(lambda: torch.topk(sims.float(), cfg["k"], dim=1), reps=5, warmup=1)
    import repeval_ref.torch.knn as tk

    selection = []
    saved = (tk._TWO_STAGE, tk._CHUNK)
    try:
        for two_stage, chunk in (
            (False, saved[1]),
            (True, 64),
            (True, 128),
            (True, 256),
            (True, 512),
        ):
            tk._TWO_STAGE, tk._CHUNK = two_stage, chunk
            t, _ = timer(
                lambda: knn_classify_torch(
                    bank,
                    labels,
                    queries,
                    cfg["k"],
                    cfg["tau"],
                    cfg["n_classes"],
                    dtype=dt,
                    query_block=qb0,
                    bank_block=bb0,
                ),
                reps=1,
                warmup=0,
            )
            t_sel, _ = timer(lambda: tk._select_topk(sims, cfg["k"]), reps=5, warmup=1)
            selection.append(
                {
                    "two_stage": two_stage,
                    "chunk": chunk if two_stage else None,
                    "knn_seconds": t,
                    "tile_selection_seconds": t_sel,
                }
            )
    finally:
        tk._TWO_STAGE, tk._CHUNK = saved
    best = min(sweep, key=lambda r: r["seconds"])
    return {
        "sweep": sweep,
        "best": best,
        "selection": selection,
        "tile": [qb0, bb0],
        "tile_matmul_seconds": t_mm,
        "tile_topk_seconds": t_topk,
        "tile_topk_after_float32_cast_seconds": t_topk32,
    }


def extract_workers(cfg, device, timer):
    """Extraction throughput against DataLoader workers, and from a GPU-resident tensor."""
    torch.manual_seed(0)
    model = (
        TinyViT(
            image_size=cfg["img"],
            patch_size=cfg["patch"],
            in_channels=3,
            dim=cfg["dim"],
            depth=cfg["depth"],
            heads=cfg["heads"],
            mlp_ratio=4,
        )
        .to(device)
        .eval()
    )
    n = 4 * cfg["n_images"]
    images = torch.randn(n, 3, cfg["img"], cfg["img"])
    layers = [f"blocks.{i}" for i in range(cfg["depth"] - 4, cfg["depth"])]
    kw = dict(layers=layers, poolings=("cls", "mean"), batch_size=cfg["batch"], device=device)
    out = {"n_images": n, "host_float32": []}
    timer(lambda: extract_features(model, images[: cfg["batch"]], **kw), reps=1, warmup=0)
    for workers in (0, 4, 8):
        t, _ = timer(
            lambda workers=workers: extract_features(model, images, num_workers=workers, **kw),
            reps=1,
            warmup=0,
        )
        out["host_float32"].append({"num_workers": workers, "images_per_second": n / t})
    if device.type == "cuda":
        resident = images.to(device)
        t, feats = timer(lambda: extract_features(model, resident, **kw), reps=1, warmup=0)
        out["gpu_resident_images_per_second"] = n / t
        ref = extract_features(model, images[: cfg["batch"]], **kw)
        out["resident_vs_host_max_abs_diff"] = float(
            np.abs(feats.view(4, "cls+mean")[: cfg["batch"]] - ref.view(4, "cls+mean")).max()
        )
    return out


def _driver():
    """The NVIDIA driver version (``nvidia-smi``), or None where there is none."""
    import subprocess

    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tiny", action="store_true", help="tiny sizes (runs in seconds on a CPU)")
    p.add_argument("--device", default=None, help="default: cuda if available, else cpu")
    p.add_argument("--out", default="gpu_results.json")
    p.add_argument(
        "--sweep",
        action="store_true",
        help="also sweep the k-NN tile sizes and the extraction's DataLoader workers",
    )
    p.add_argument(
        "--skip",
        nargs="*",
        default=[],
        choices=["matmul", "knn", "check", "grid", "extract", "tiles", "workers"],
    )
    args = p.parse_args(argv)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type != "cuda" and not args.tiny:
        p.error("full sizes need a CUDA device; use --tiny to smoke-test on a CPU")
    cfg = TINY if args.tiny else FULL
    results = {
        "config": "tiny" if args.tiny else "full",
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device)
        if device.type == "cuda"
        else platform.processor(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "driver": _driver(),
        "date_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "sizes": cfg,
    }
    timer = Timer(device)

    def save():
        with open(args.out, "w") as f:
            json.dump(results, f, indent=2)

    def section(name, fn):
        if name in args.skip:
            return None
        t0 = time.perf_counter()
        try:
            results[name] = fn()
        except Exception as exc:  # record and continue with the next section
            results[name] = {
                "error": f"{type(exc).__name__}: {exc}",
                "traceback": traceback.format_exc(),
            }
        results[name]["section_seconds"] = time.perf_counter() - t0
        print(
            f"[{name}] {json.dumps({k: v for k, v in results[name].items() if k != 'traceback'})}",
            flush=True,
        )
        save()
        if device.type == "cuda":
            torch.cuda.empty_cache()
        return results[name]

    mm = section("matmul", lambda: matmul_bound(cfg, device, timer)) or {}
    bound = mm.get("tile_tflops") or mm.get("square_tflops") or 1.0
    section("knn", lambda: knn_speed(cfg, device, timer, bound))
    section("check", lambda: knn_correctness(cfg, device))
    section("grid", lambda: grid_speed(cfg, device, timer))
    section("extract", lambda: extraction_speed(cfg, device, timer))
    if args.sweep:
        section("tiles", lambda: knn_tiles(cfg, device, timer))
        section("workers", lambda: extract_workers(cfg, device, timer))
    save()
    print(f"results written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

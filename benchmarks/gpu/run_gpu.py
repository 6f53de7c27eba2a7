"""GPU benchmark of the PyTorch reference loop: extraction throughput and exact k-NN at ImageNet scale.

Measures, in one run, on one CUDA device:

1. the achieved bfloat16 matrix-multiply rate (TFLOP/s), on a large square product and
   on the product shape of one k-NN similarity tile: this is the bound;
2. exact weighted k-NN (:func:`repeval_ref.torch.knn_classify_torch`) of 50,000
   queries against a 1,281,167 x 768 bank (ImageNet-1k's training set at ViT-B width)
   in bfloat16, against the time the bound allows for its ``2 * n_query * n_bank * d``
   FLOPs, plus the time of the similarity products alone;
3. correctness at scale: float32 k-NN on the GPU against the float64 CPU reference on a
   smaller bank (predictions must be equal), and the agreement of bfloat16 with float32;
4. feature-extraction throughput (images/s) of a ViT-B/16-shaped encoder under bf16
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

FULL = dict(n_bank=1_281_167, d=768, n_query=50_000, k=20, tau=0.07, n_classes=1000, square=8192,
            query_block=8192, bank_block=262_144, check_bank=100_000, check_query=500, agree_query=2000,
            img=224, patch=16, dim=768, depth=12, heads=12, n_images=1024, batch=256)
TINY = dict(n_bank=5000, d=64, n_query=300, k=20, tau=0.07, n_classes=10, square=256,
            query_block=128, bank_block=1024, check_bank=2000, check_query=50, agree_query=100,
            img=32, patch=8, dim=64, depth=4, heads=4, n_images=64, batch=16)


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
    return {"dtype": str(dt), "square_n": n, "square_tflops": square,
            "tile_shape": [q.shape[0], cfg["d"], bank.shape[0]], "tile_tflops": tile}


def knn_speed(cfg, device, timer, bound_tflops):
    dt = torch.bfloat16 if device.type == "cuda" else torch.float32
    g = torch.Generator(device=device).manual_seed(0)
    bank = torch.randn(cfg["n_bank"], cfg["d"], device=device, dtype=dt, generator=g)
    queries = torch.randn(cfg["n_query"], cfg["d"], device=device, dtype=dt, generator=g)
    labels = torch.randint(0, cfg["n_classes"], (cfg["n_bank"],), generator=torch.Generator().manual_seed(0))
    kw = dict(dtype=dt, query_block=cfg["query_block"], bank_block=cfg["bank_block"])
    t, _ = timer(lambda: knn_classify_torch(bank, labels, queries, cfg["k"], cfg["tau"], cfg["n_classes"], **kw),
                 reps=1, warmup=0)
    ub, uq = _unit(bank, "bank", dt, device), _unit(queries, "queries", dt, device)

    def products_only():
        for qs in range(0, uq.shape[0], cfg["query_block"]):
            for bs in range(0, ub.shape[0], cfg["bank_block"]):
                uq[qs:qs + cfg["query_block"]] @ ub[bs:bs + cfg["bank_block"]].T

    t_mm, _ = timer(products_only, reps=1, warmup=0)
    t_topk, _ = timer(lambda: topk_neighbors(ub, uq, cfg["k"], query_block=cfg["query_block"],
                                             bank_block=cfg["bank_block"], exact_ties=False), reps=1, warmup=0)
    flops = 2.0 * cfg["n_query"] * cfg["n_bank"] * cfg["d"]
    t_bound = flops / (bound_tflops * 1e12)
    return {"n_bank": cfg["n_bank"], "d": cfg["d"], "n_query": cfg["n_query"], "k": cfg["k"], "dtype": str(dt),
            "query_block": cfg["query_block"], "bank_block": cfg["bank_block"], "seconds_total": t,
            "seconds_products_only": t_mm, "seconds_topk_search": t_topk, "tflop": flops / 1e12,
            "seconds_at_matmul_bound": t_bound, "fraction_of_bound_total": t_bound / t,
            "fraction_of_bound_products": t_bound / t_mm, "queries_per_second": cfg["n_query"] / t}


def knn_correctness(cfg, device):
    rng = np.random.default_rng(1)
    centers = rng.normal(size=(cfg["n_classes"], cfg["d"]))
    y = rng.integers(0, cfg["n_classes"], cfg["check_bank"])
    bank = (centers[y] + 2.0 * rng.normal(size=(cfg["check_bank"], cfg["d"]))).astype(np.float32)
    yq = rng.integers(0, cfg["n_classes"], cfg["agree_query"])
    queries = (centers[yq] + 2.0 * rng.normal(size=(cfg["agree_query"], cfg["d"]))).astype(np.float32)
    nq = cfg["check_query"]
    ref = knn_classify(bank, y, queries[:nq], cfg["k"], cfg["tau"], cfg["n_classes"])
    tb, tq = torch.from_numpy(bank).to(device), torch.from_numpy(queries).to(device)
    kw = dict(query_block=cfg["query_block"], bank_block=cfg["bank_block"])
    f32 = knn_classify_torch(tb, y, tq, cfg["k"], cfg["tau"], cfg["n_classes"], dtype=torch.float32, **kw)
    low_dt = torch.bfloat16 if device.type == "cuda" else torch.float32
    low = knn_classify_torch(tb, y, tq, cfg["k"], cfg["tau"], cfg["n_classes"], dtype=low_dt, **kw)
    return {"bank": cfg["check_bank"], "float32_vs_float64_reference_equal_fraction": float((f32[:nq] == ref).mean()),
            "low_precision_dtype": str(low_dt),
            "low_precision_vs_float32_agreement": float((low == f32).mean()),
            "float32_accuracy": float((f32 == yq).mean())}


def vit_gflop_per_image(img, patch, dim, depth):
    """Forward FLOPs (2 per multiply-add) of a ViT: patch embedding, attention and MLP (ratio 4)."""
    n = (img // patch) ** 2 + 1
    per_block = 12 * n * dim * dim + 2 * n * n * dim
    embed = (n - 1) * 3 * patch * patch * dim
    return 2 * (depth * per_block + embed) / 1e9


def extraction_speed(cfg, device, timer):
    torch.manual_seed(0)
    model = TinyViT(image_size=cfg["img"], patch_size=cfg["patch"], in_channels=3, dim=cfg["dim"],
                    depth=cfg["depth"], heads=cfg["heads"], mlp_ratio=4).to(device).eval()
    images = torch.randn(cfg["n_images"], 3, cfg["img"], cfg["img"])
    use_amp = device.type == "cuda"
    batch = images[:cfg["batch"]].to(device)

    def forward_only():
        with torch.no_grad(), torch.autocast(device.type, dtype=torch.bfloat16, enabled=use_amp):
            for _ in range(cfg["n_images"] // cfg["batch"]):
                model(batch)

    t_fwd, _ = timer(forward_only, reps=1, warmup=1)
    layers = [f"blocks.{i}" for i in range(cfg["depth"] - 4, cfg["depth"])]
    t_ext, feats = timer(lambda: extract_features(model, images, layers=layers, poolings=("cls", "mean"),
                                                  batch_size=cfg["batch"], device=device, num_workers=2),
                         reps=1, warmup=1)
    gflop = vit_gflop_per_image(cfg["img"], cfg["patch"], cfg["dim"], cfg["depth"])
    n_fwd = (cfg["n_images"] // cfg["batch"]) * cfg["batch"]
    return {"model": f"ViT img{cfg['img']}/p{cfg['patch']} dim{cfg['dim']} depth{cfg['depth']}",
            "gflop_per_image": gflop, "batch": cfg["batch"], "autocast_bf16": use_amp,
            "forward_images_per_second": n_fwd / t_fwd, "forward_tflops": n_fwd * gflop / t_fwd / 1e3,
            "extract_images_per_second": cfg["n_images"] / t_ext,
            "extract_tflops": cfg["n_images"] * gflop / t_ext / 1e3,
            "extract_feature_dim_last4_cls_mean": int(feats.view(4, "cls+mean").shape[1])}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tiny", action="store_true", help="tiny sizes (runs in seconds on a CPU)")
    p.add_argument("--device", default=None, help="default: cuda if available, else cpu")
    p.add_argument("--out", default="gpu_results.json")
    p.add_argument("--skip", nargs="*", default=[], choices=["matmul", "knn", "check", "extract"])
    args = p.parse_args(argv)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type != "cuda" and not args.tiny:
        p.error("full sizes need a CUDA device; use --tiny to smoke-test on a CPU")
    cfg = TINY if args.tiny else FULL
    results = {"config": "tiny" if args.tiny else "full", "device": str(device),
               "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor(),
               "torch": torch.__version__, "sizes": cfg}
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
            results[name] = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
        results[name]["section_seconds"] = time.perf_counter() - t0
        print(f"[{name}] {json.dumps({k: v for k, v in results[name].items() if k != 'traceback'})}", flush=True)
        save()
        if device.type == "cuda":
            torch.cuda.empty_cache()
        return results[name]

    mm = section("matmul", lambda: matmul_bound(cfg, device, timer)) or {}
    bound = mm.get("tile_tflops") or mm.get("square_tflops") or 1.0
    section("knn", lambda: knn_speed(cfg, device, timer, bound))
    section("check", lambda: knn_correctness(cfg, device))
    section("extract", lambda: extraction_speed(cfg, device, timer))
    save()
    print(f"results written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The GPU benchmark script runs end to end with tiny sizes on the CPU."""

import importlib.util
import json
import os

import pytest
import torch

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.mark.slow
def test_gpu_benchmark_tiny_on_cpu(tmp_path):
    path = os.path.join(HERE, "..", "benchmarks", "gpu", "run_gpu.py")
    spec = importlib.util.spec_from_file_location("run_gpu", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = tmp_path / "r.json"
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        assert mod.main(["--tiny", "--device", "cpu", "--out", str(out)]) == 0
    finally:
        torch.set_num_threads(threads)
    res = json.loads(out.read_text())
    for section in ("matmul", "knn", "check", "extract"):
        assert "error" not in res[section], res[section].get("traceback")
    assert res["check"]["float32_vs_float64_reference_equal_fraction"] == 1.0
    assert res["knn"]["seconds_total"] > 0 and res["matmul"]["square_tflops"] > 0
    assert res["extract"]["extract_feature_dim_last4_cls_mean"] == 4 * 2 * 64
    # ViT-B/16 at 224 pixels: about 17.6 G multiply-adds, i.e. 35 GFLOP per image.
    assert abs(mod.vit_gflop_per_image(224, 16, 768, 12) - 35.1) < 0.3

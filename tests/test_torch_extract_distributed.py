"""Two gloo processes give the same k-NN predictions and features as one process."""

import os

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from repeval_ref import knn_classify
from repeval_ref.torch import TinyViT, knn_classify_sharded, knn_classify_torch, shard_range
from repeval_ref.torch.extract import extract_features

N_BANK, N_DATA, WORLD = 37, 23, 2  # both odd: not divisible by the world size
K_TAU = [(1, 0.07), (5, 1e-4), (8, 0.5), (40, 0.1)]


def _problem():
    rng = np.random.default_rng(0)
    bank = rng.normal(size=(N_BANK, 5))
    y = rng.integers(0, 3, N_BANK)
    queries = rng.normal(size=(11, 5))
    g = torch.Generator().manual_seed(0)
    images = torch.rand(N_DATA, 1, 8, 8, generator=g)
    labels = torch.randint(0, 3, (N_DATA,), generator=g)
    return bank, y, queries, images, labels


def _model():
    torch.manual_seed(0)
    return TinyViT(image_size=8, patch_size=4, dim=8, depth=2, heads=2)


def _worker(rank, init_file, out_dir):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=WORLD)
    try:
        bank, y, queries, images, labels = _problem()
        start, stop = shard_range(N_BANK, rank, WORLD)
        for k, tau in K_TAU:
            pred = knn_classify_sharded(
                bank[start:stop],
                y[start:stop],
                queries,
                k,
                tau,
                3,
                shard_offset=start,
                n_train=N_BANK,
                query_block=4,
                bank_block=5,
            )
            np.save(os.path.join(out_dir, f"knn_{k}_{rank}.npy"), pred)
        # Uneven shards, one of them empty: rank 0 holds the whole bank.
        if rank == 0:
            shard_h, shard_y = torch.from_numpy(bank), y
        else:
            shard_h, shard_y = torch.zeros(0, bank.shape[1], dtype=torch.float64), y[:0]
        pred = knn_classify_sharded(
            shard_h, shard_y, queries, 5, 0.07, 3, shard_offset=0 if rank == 0 else N_BANK
        )
        np.save(os.path.join(out_dir, f"knn_empty_{rank}.npy"), pred)
        feats = extract_features(
            _model(),
            (images, labels),
            poolings=("cls", "mean"),
            batch_size=4,
            device="cpu",
            distributed=True,
        )
        np.save(os.path.join(out_dir, f"feat_{rank}.npy"), feats.view(2, "cls+mean"))
        np.save(os.path.join(out_dir, f"lab_{rank}.npy"), feats.labels)
        cached = extract_features(
            _model(),
            (images, labels),
            poolings=("cls",),
            batch_size=3,
            device="cpu",
            distributed=True,
            cache_dir=os.path.join(out_dir, "cache"),
        )
        np.save(os.path.join(out_dir, f"cached_{rank}.npy"), cached.view(2, "cls"))
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
@pytest.mark.skipif(not dist.is_available(), reason="torch.distributed is not available")
def test_two_ranks_equal_one_process(tmp_path):
    mp.spawn(_worker, args=(str(tmp_path / "rendezvous"), str(tmp_path)), nprocs=WORLD, join=True)
    bank, y, queries, images, labels = _problem()
    for k, tau in K_TAU:
        single = knn_classify_torch(bank, y, queries, k, tau, 3)
        np.testing.assert_array_equal(single, knn_classify(bank, y, queries, k, tau, 3))
        for rank in range(WORLD):
            np.testing.assert_array_equal(np.load(tmp_path / f"knn_{k}_{rank}.npy"), single)
    for rank in range(WORLD):
        np.testing.assert_array_equal(
            np.load(tmp_path / f"knn_empty_{rank}.npy"), knn_classify(bank, y, queries, 5, 0.07, 3)
        )
    one = extract_features(
        _model(), (images, labels), poolings=("cls", "mean"), batch_size=4, device="cpu"
    )
    for rank in range(WORLD):
        got = np.load(tmp_path / f"feat_{rank}.npy")
        assert got.shape == (N_DATA, 32)  # every sample once: none dropped, none duplicated
        np.testing.assert_allclose(got, one.view(2, "cls+mean"), rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(np.load(tmp_path / f"lab_{rank}.npy"), labels.numpy())
        np.testing.assert_allclose(
            np.load(tmp_path / f"cached_{rank}.npy"), one.view(2, "cls"), rtol=1e-5, atol=1e-6
        )

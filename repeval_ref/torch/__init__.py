"""PyTorch side of :mod:`repeval_ref`: the reference evaluation loop, made reusable.

Book: chapter "Linear probes" and the PyTorch reference loop; seed 000, "Frozen means
evaluation mode" and "In PyTorch".

Modules
-------
``freeze``   frozen feature extraction and the bit-for-bit encoder-state check
``extract``  forward hooks on chosen blocks, token pooling, disk cache, distributed extraction
``probe``    non-affine BatchNorm + Linear probe, its training, and its folding into a Linear
``grid``     many probes trained at once (DINOv2-style grid), selected on validation data
``knn``      exact weighted k-NN with blocked similarities and a running top-k (also sharded)
``models``   the built-in small CNN, a tiny ViT stand-in, and torchvision/timm backbones
"""
from .freeze import (
    evaluation_mode,
    frozen_features,
    module_device,
    restore_training_flags,
    state_diff,
    state_snapshot,
    state_unchanged,
    training_flags,
)
from .knn import knn_classify_sharded, knn_classify_torch, shard_range, topk_neighbors, weighted_vote
from .models import (
    BackboneUnavailable,
    SmallCNN,
    TinyViT,
    default_blocks,
    digits_images,
    load_backbone,
    pretrain_encoder,
)

__all__ = [
    "BackboneUnavailable",
    "SmallCNN",
    "TinyViT",
    "default_blocks",
    "digits_images",
    "evaluation_mode",
    "frozen_features",
    "knn_classify_sharded",
    "knn_classify_torch",
    "load_backbone",
    "module_device",
    "pretrain_encoder",
    "restore_training_flags",
    "shard_range",
    "state_diff",
    "state_snapshot",
    "state_unchanged",
    "topk_neighbors",
    "training_flags",
    "weighted_vote",
]

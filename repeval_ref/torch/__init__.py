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
``models``   the built-in small CNN, a tiny ViT (and its transformer block), block names
``schedule`` the cosine learning-rate factor (with optional warm-up) of every trained probe
``data``     an image-folder dataset read with Pillow (no torchvision needed)
``attentive`` a trainable attentive probe (one learned query per head) on frozen tokens
``finetune`` partial fine-tuning (train the last j blocks) and layer-wise learning-rate groups

The command ``repeval loop`` (:mod:`repeval_ref.cli.loop`) runs the whole loop. Loading
torchvision, timm or zoo backbones by name is :mod:`repeval_ref.backbones`, one floor above
this package and :mod:`repeval_ref.zoo`.
"""

from .attentive import AttentiveProbe, attentive_predict, train_attentive_probe
from .data import ImageFolder, PreparedImages
from .extract import (
    POOLINGS,
    BlockTaps,
    Features,
    StaleCacheError,
    dataset_fingerprint,
    extract_features,
    model_fingerprint,
    pool_output,
    resolve_device,
)
from .finetune import freeze_all_but_last, layerwise_lr_groups, parameter_layers
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
from .grid import GridResult, grid_accuracies, grid_views, probe_grid_search, train_probe_grid
from .knn import (
    knn_classify_sharded,
    knn_classify_torch,
    shard_range,
    topk_neighbors,
    weighted_vote,
)
from .models import SmallCNN, TinyViT, TransformerBlock, default_blocks, default_prefix_tokens
from .probe import LinearProbe, fold_probe, probe_accuracy, running_mean_shift, train_probe
from .schedule import cosine_factor, cosine_schedule

__all__ = [
    "AttentiveProbe",
    "BlockTaps",
    "Features",
    "GridResult",
    "ImageFolder",
    "LinearProbe",
    "POOLINGS",
    "PreparedImages",
    "SmallCNN",
    "StaleCacheError",
    "TinyViT",
    "TransformerBlock",
    "attentive_predict",
    "cosine_factor",
    "cosine_schedule",
    "dataset_fingerprint",
    "default_blocks",
    "default_prefix_tokens",
    "evaluation_mode",
    "extract_features",
    "fold_probe",
    "freeze_all_but_last",
    "frozen_features",
    "grid_accuracies",
    "grid_views",
    "knn_classify_sharded",
    "knn_classify_torch",
    "layerwise_lr_groups",
    "model_fingerprint",
    "module_device",
    "parameter_layers",
    "pool_output",
    "probe_accuracy",
    "probe_grid_search",
    "resolve_device",
    "restore_training_flags",
    "running_mean_shift",
    "shard_range",
    "state_diff",
    "state_snapshot",
    "state_unchanged",
    "topk_neighbors",
    "train_attentive_probe",
    "train_probe",
    "train_probe_grid",
    "training_flags",
    "weighted_vote",
]

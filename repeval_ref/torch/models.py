"""Encoders for the reference loop: a built-in small CNN, a tiny ViT, and real backbones.

Book: chapter "Linear probes", the PyTorch reference loop; seed 000, "In PyTorch"
(a real backbone replaces the small encoder, the rest of the loop is unchanged).

* :class:`SmallCNN` is the offline default: a three-block convolutional network with
  BatchNorm (so that evaluation mode matters) for 8x8 ``load_digits`` images. It is
  trained for a few epochs by :func:`pretrain_encoder`, or used at random
  initialisation.
* :class:`TinyViT` is a ViT-shaped module (patch embedding, class token, ``blocks``
  that return token sequences). It stands in for a real ViT in tests of hooks,
  pooling and layer choice, since neither torchvision nor timm is required.
* :func:`load_backbone` builds a torchvision or timm architecture and loads its
  weights from a *local* file. Both libraries are imported only when asked for; a
  download that cannot happen offline is reported with a message that says what to do.
* :func:`default_blocks` names a model's blocks (read from the modules themselves, so
  torchvision's ``encoder.layers.encoder_layer_<i>`` comes out right) and
  :func:`default_prefix_tokens` says how many class/register tokens precede the patch
  tokens (timm's ``num_prefix_tokens``), which the ``"mean"`` pooling leaves out.
"""
from __future__ import annotations

import importlib
import os
import urllib.error

import numpy as np
import torch
from torch import nn

from .._validation import as_labels, check_int, check_positive

__all__ = [
    "SmallCNN",
    "TinyViT",
    "pretrain_encoder",
    "load_backbone",
    "default_blocks",
    "default_prefix_tokens",
    "BackboneUnavailable",
    "digits_images",
]


class BackboneUnavailable(RuntimeError):
    """A requested backbone library or its weights are not available on this machine."""


class SmallCNN(nn.Module):
    """A small convolutional encoder with BatchNorm, returning pooled features.

    Three blocks ``conv3x3 -> BatchNorm2d -> ReLU`` (the second and third also halve
    the resolution), then a global average pool. For an input of shape
    ``(b, in_channels, H, W)`` the output has shape ``(b, 4 * width)``. The blocks are
    ``self.blocks[0..2]``, so hooks can read every block's feature map.

    Parameters
    ----------
    in_channels : int
        Input channels (1 for ``load_digits``).
    width : int
        Channels of the first block; later blocks have ``2 * width`` and ``4 * width``.
    """

    def __init__(self, in_channels=1, width=16):
        super().__init__()
        in_channels = check_int(in_channels, "in_channels", minimum=1)
        width = check_int(width, "width", minimum=1)
        chans = [in_channels, width, 2 * width, 4 * width]
        blocks = []
        for i in range(3):
            blocks.append(
                nn.Sequential(
                    nn.Conv2d(chans[i], chans[i + 1], 3, stride=1 if i == 0 else 2, padding=1, bias=False),
                    nn.BatchNorm2d(chans[i + 1]),
                    nn.ReLU(inplace=False),
                )
            )
        self.blocks = nn.ModuleList(blocks)
        self.out_dim = chans[-1]

    def feature_map(self, x):
        """Output of the last block, shape (b, 4 * width, H / 4, W / 4) (rounded up)."""
        if not isinstance(x, torch.Tensor) or x.ndim != 4 or x.shape[1] != self.blocks[0][0].in_channels:
            shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(
                f"x must be an image tensor of shape (b, {self.blocks[0][0].in_channels}, H, W), got {shape}"
            )
        for block in self.blocks:
            x = block(x)
        return x

    def forward(self, x):
        return self.feature_map(x).mean(dim=(2, 3))


class _Block(nn.Module):
    """Pre-norm transformer block: tokens (b, t, d) -> tokens (b, t, d)."""

    def __init__(self, dim, heads, mlp_ratio):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp_ratio * dim), nn.GELU(), nn.Linear(mlp_ratio * dim, dim))

    def forward(self, x):
        y = self.norm1(x)
        x = x + self.attn(y, y, y, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class TinyViT(nn.Module):
    """A ViT-shaped encoder: patch embedding, class token, ``blocks`` returning tokens.

    Each element of ``self.blocks`` maps tokens of shape ``(b, 1 + p, dim)`` to the
    same shape (token 0 is the class token, the other ``p`` are patch tokens), which
    is the layout a timm/torchvision ViT block has. ``forward`` returns the final
    normalised class token, shape ``(b, dim)``.

    Parameters
    ----------
    image_size, patch_size, in_channels, dim, depth, heads, mlp_ratio : int
        Usual ViT sizes; ``image_size`` must be divisible by ``patch_size``.
    """

    def __init__(self, image_size=8, patch_size=2, in_channels=1, dim=32, depth=4, heads=4, mlp_ratio=2):
        super().__init__()
        image_size = check_int(image_size, "image_size", minimum=1)
        patch_size = check_int(patch_size, "patch_size", minimum=1)
        dim = check_int(dim, "dim", minimum=1)
        depth = check_int(depth, "depth", minimum=1)
        heads = check_int(heads, "heads", minimum=1)
        if image_size % patch_size:
            raise ValueError(f"image_size={image_size} is not divisible by patch_size={patch_size}")
        if dim % heads:
            raise ValueError(f"dim={dim} is not divisible by heads={heads}")
        n_patches = (image_size // patch_size) ** 2
        self.patch_embed = nn.Conv2d(in_channels, dim, patch_size, stride=patch_size)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(0.02 * torch.randn(1, 1 + n_patches, dim))
        self.blocks = nn.ModuleList(_Block(dim, heads, mlp_ratio) for _ in range(depth))
        self.norm = nn.LayerNorm(dim)
        self.out_dim = dim

    def _check_images(self, x):
        if not isinstance(x, torch.Tensor) or x.ndim != 4:
            shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(f"x must be an image tensor of shape (b, c, H, W), got {shape}")
        c_in, ps = self.patch_embed.in_channels, self.patch_embed.kernel_size[0]
        if x.shape[1] != c_in or x.shape[2] % ps or x.shape[3] % ps or x.shape[2] < ps or x.shape[3] < ps:
            raise ValueError(
                f"x has shape {tuple(x.shape)}; this ViT needs {c_in} channel(s) and a height "
                f"and width that are positive multiples of its patch size {ps}"
            )

    def position_embedding(self, grid_h, grid_w):
        """Position embedding for a ``grid_h x grid_w`` patch grid: (1, 1 + grid_h * grid_w, dim).

        At the training grid it is ``pos_embed`` itself; another grid (a larger image)
        gets the patch part resized bicubically, as DINO's ``interpolate_pos_encoding``
        does, and the class token's entry unchanged.
        """
        n = self.pos_embed.shape[1] - 1
        side = int(round(n ** 0.5))
        if grid_h * grid_w == n and grid_h == grid_w == side:
            return self.pos_embed
        patch = self.pos_embed[:, 1:].reshape(1, side, side, -1).permute(0, 3, 1, 2)
        patch = nn.functional.interpolate(patch, size=(grid_h, grid_w), mode="bicubic", align_corners=False)
        patch = patch.permute(0, 2, 3, 1).reshape(1, grid_h * grid_w, -1)
        return torch.cat([self.pos_embed[:, :1], patch], dim=1)

    def tokens(self, x):
        """Patch-embed ``x`` (b, c, H, W) and prepend the class token: (b, 1 + p, dim)."""
        self._check_images(x)
        p = self.patch_embed(x)
        pos = self.position_embedding(p.shape[2], p.shape[3])
        p = p.flatten(2).transpose(1, 2)
        cls = self.cls_token.expand(p.shape[0], -1, -1)
        return torch.cat([cls, p], dim=1) + pos

    def forward_tokens(self, x):
        """Final normalised tokens, shape (b, 1 + p, dim): class token first, then the patches."""
        t = self.tokens(x)
        for block in self.blocks:
            t = block(t)
        return self.norm(t)

    def forward(self, x):
        return self.forward_tokens(x)[:, 0]


def pretrain_encoder(encoder, images, labels, n_classes, *, epochs=3, lr=3e-3, batch_size=64, seed=0):
    """Train ``encoder`` plus a throw-away linear head by cross-entropy (supervised pre-training).

    The head is discarded, as the projection head of a pre-trained model is before
    evaluation; the encoder is returned in evaluation mode. This only exists so that
    the offline demo has an encoder whose features mean something.

    Parameters
    ----------
    encoder : torch.nn.Module with attribute ``out_dim``
    images : torch.Tensor of shape (n, ...)
    labels : array_like of int, shape (n,)
    n_classes : int
    epochs, batch_size : int
    lr : float
        Adam learning rate.
    seed : int
        Seed of the shuffling and of the head's initialisation.

    Returns
    -------
    torch.nn.Module
        ``encoder`` itself (trained in place), in evaluation mode.
    """
    if not isinstance(encoder, nn.Module):
        raise TypeError(f"encoder must be a torch.nn.Module, got {type(encoder).__name__}")
    if not isinstance(images, torch.Tensor):
        raise TypeError(f"images must be a torch.Tensor, got {type(images).__name__}")
    n_classes = check_int(n_classes, "n_classes", minimum=2)
    y = torch.from_numpy(as_labels(labels, "labels", n=images.shape[0], n_classes=n_classes))
    epochs = check_int(epochs, "epochs", minimum=1)
    batch_size = check_int(batch_size, "batch_size", minimum=1)
    lr = check_positive(lr, "lr")
    out_dim = getattr(encoder, "out_dim", None)
    if out_dim is None:
        raise ValueError("encoder needs an integer attribute out_dim (its feature dimension)")
    gen = torch.Generator().manual_seed(int(seed))
    head = nn.Linear(out_dim, n_classes)
    with torch.no_grad():
        head.weight.normal_(0, 0.01, generator=gen)
        head.bias.zero_()
    opt = torch.optim.Adam(list(encoder.parameters()) + list(head.parameters()), lr=lr)
    encoder.train()
    for _ in range(epochs):
        order = torch.randperm(images.shape[0], generator=gen)
        for start in range(0, images.shape[0], batch_size):
            idx = order[start:start + batch_size]
            if idx.numel() < 2:  # a batch of one has no BatchNorm statistics
                continue
            loss = nn.functional.cross_entropy(head(encoder(images[idx])), y[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    return encoder.eval()


# ----------------------------------------------------------------------------------
# Real backbones (torchvision / timm), loaded from local weights only.

def _import_library(library):
    if library not in ("torchvision", "timm"):
        raise ValueError(f"library must be 'torchvision' or 'timm', got {library!r}")
    try:
        return importlib.import_module(library)
    except ImportError as exc:
        raise BackboneUnavailable(
            f"{library} is not installed, so a {library} backbone cannot be built. Install a "
            f"{library} build that matches this torch ({torch.__version__}), or use the "
            "built-in SmallCNN (the default of `python -m repeval_ref.loop`)."
        ) from exc


def _offline_message(library, arch):
    return (
        f"could not download pretrained weights for {library} model {arch!r}: this machine "
        "cannot reach the model hub. Download the weights elsewhere, copy the file here, "
        "and pass its path as weights=... (or --weights PATH)."
    )


def _load_state(path):
    """The state dict stored in ``path``; ValueError naming the file if it is not a checkpoint."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except OSError:  # unreadable file: the OS error says why
        raise
    except Exception as exc:  # torch.load's errors differ by file kind (KeyError, EOFError, ...)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValueError(
            f"weights file {path!r} is not a PyTorch checkpoint that loads with weights_only=True "
            f"({type(exc).__name__}: {first[:200]}); save it with torch.save(model.state_dict(), path)"
        ) from exc
    if isinstance(state, dict):
        for key in ("state_dict", "model", "module"):  # common checkpoint wrappers
            if key in state and isinstance(state[key], dict):
                state = state[key]
                break
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ValueError(f"weights file {path!r} does not hold a state dict of tensors")
    return state


def _strip_classifier(model):
    """Replace the classification head by the identity so ``forward`` returns features."""
    if hasattr(model, "reset_classifier"):  # timm
        model.reset_classifier(0)
        return model
    for attr in ("fc", "head", "heads", "classifier"):
        if isinstance(getattr(model, attr, None), nn.Module):
            setattr(model, attr, nn.Identity())
            return model
    return model


def load_backbone(arch, weights=None, *, library="torchvision", hub=False, keep_head=False):
    """Build a torchvision or timm backbone and load its weights from a local file, or load a zoo encoder.

    Parameters
    ----------
    arch : str
        Architecture name, e.g. ``"resnet50"`` or ``"vit_b_16"`` (torchvision), or
        ``"vit_base_patch14_dinov2"`` (timm).
    weights : str or os.PathLike, optional
        Path to a local state dict (``torch.save(model.state_dict(), path)``, or a
        checkpoint dict with a ``"state_dict"``/``"model"`` entry). Loaded with
        ``weights_only=True``; a file that is not such a checkpoint is a
        ``ValueError`` naming it. Without it the model is randomly initialised unless
        ``hub=True`` (the loop command refuses that unless ``--random-init`` is given).
    library : {"torchvision", "timm", "zoo"}
        Which library builds the architecture; imported only now. ``"zoo"``: ``arch``
        names an encoder of :mod:`repeval_ref.zoo`, returned by
        :func:`repeval_ref.zoo.load` with its own weights (frozen; ``weights`` and
        ``hub`` must be left out; its ``forward`` already returns pooled features).
        ``arch="zoo:NAME"`` means the same whatever ``library`` says.
    hub : bool
        Ask the library to download pretrained weights. Offline this fails, and the
        failure is re-raised as :class:`BackboneUnavailable` with instructions.
    keep_head : bool
        Keep the classification head (default: replaced by the identity, so the
        model returns its pooled features).

    Returns
    -------
    torch.nn.Module
        The model in evaluation mode.
    """
    if not isinstance(arch, str) or not arch:
        raise TypeError(f"arch must be a non-empty string, got {arch!r}")
    if arch.startswith("zoo:"):
        library, arch = "zoo", arch[len("zoo:"):]
    if library == "zoo":
        if weights is not None or hub:
            raise ValueError(f"zoo encoder {arch!r} loads the weights shipped with it; leave out weights and hub")
        from repeval_ref import zoo

        return zoo.load(arch)
    if weights is not None and hub:
        raise ValueError("pass either weights (a local path) or hub=True, not both")
    if weights is not None:
        weights = os.fspath(weights)
        if not os.path.isfile(weights):
            raise FileNotFoundError(f"weights file not found: {weights!r}")
    lib = _import_library(library)
    try:
        if library == "torchvision":
            model = lib.models.get_model(arch, weights="DEFAULT" if hub else None)
        else:
            model = lib.create_model(arch, pretrained=bool(hub))
    except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
        raise BackboneUnavailable(_offline_message(library, arch)) from exc
    except (OSError, RuntimeError) as exc:
        if hub and any(w in str(exc).lower() for w in ("connect", "resolve", "network", "offline", "download", "urlopen")):
            raise BackboneUnavailable(_offline_message(library, arch)) from exc
        raise
    if weights is not None:
        state = _load_state(weights)
        missing, unexpected = model.load_state_dict(state, strict=False)
        head_names = ("fc.", "head.", "heads.", "classifier.")
        missing = [k for k in missing if not k.startswith(head_names)]
        if missing or unexpected:
            raise ValueError(
                f"weights file {weights!r} does not fit {library} {arch!r}: "
                f"missing {missing[:5]}, unexpected {list(unexpected)[:5]}"
            )
    if not keep_head:
        model = _strip_classifier(model)
    return model.eval()


def default_blocks(model):
    """Names of the submodules whose outputs are the model's "blocks", in depth order.

    Recognised layouts, tried in this order:

    * a ``blocks`` container (timm ViTs, :class:`TinyViT`, :class:`SmallCNN`);
    * torchvision's ``encoder.layers`` (``VisionTransformer``): an ``nn.Sequential``
      built from an ``OrderedDict``, whose children are named ``encoder_layer_0``,
      ``encoder_layer_1``, ... rather than ``0``, ``1``, ...;
    * a ``layers`` container;
    * ``layer1`` .. ``layer4`` (ResNets).

    The names are read from ``named_children()``, so they are the real module names
    whatever the container's own naming.

    Parameters
    ----------
    model : torch.nn.Module

    Returns
    -------
    list of str
        Names usable with ``model.get_submodule`` (and as ``layers=`` of
        :func:`~repeval_ref.torch.extract.extract_features`).

    Raises
    ------
    TypeError
        If ``model`` is not a module.
    ValueError
        If none of the layouts above is found.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    for path in ("blocks", "encoder.layers", "layers"):
        try:
            seq = model.get_submodule(path)
        except AttributeError:
            continue
        if isinstance(seq, (nn.ModuleList, nn.Sequential)):
            names = [f"{path}.{name}" for name, _child in seq.named_children()]
            if names:
                return names
    names = [name for name, child in model.named_children()
             if name in ("layer1", "layer2", "layer3", "layer4")]
    if names:
        return sorted(names)
    raise ValueError(
        f"cannot find the blocks of {type(model).__name__}; pass the layer names explicitly"
    )


def default_prefix_tokens(model):
    """How many tokens precede the patch tokens in the model's token sequences.

    timm ViTs record it as ``num_prefix_tokens`` (1 for the class token, plus any
    register tokens: 5 for a ViT with 4 registers; 0 without a class token). A model
    without that attribute (torchvision's ViT, :class:`TinyViT`) is taken to have the
    class token only.

    Parameters
    ----------
    model : torch.nn.Module

    Returns
    -------
    int
        ``model.num_prefix_tokens`` when it is a non-negative integer, else 1.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    n = getattr(model, "num_prefix_tokens", None)
    if isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 0:
        return int(n)
    return 1


def digits_images(seed=0, test_size=0.25):
    """``load_digits`` as image tensors with a stratified train/test split.

    Returns
    -------
    x_train, x_test : torch.Tensor of shape (n, 1, 8, 8), float32 in [0, 1]
    y_train, y_test : numpy.ndarray of int64
    """
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    d = load_digits()
    x = (d.images / 16.0).astype(np.float32)[:, None]
    xtr, xte, ytr, yte = train_test_split(
        x, d.target.astype(np.int64), test_size=test_size, stratify=d.target, random_state=seed
    )
    return torch.from_numpy(xtr), torch.from_numpy(xte), ytr, yte

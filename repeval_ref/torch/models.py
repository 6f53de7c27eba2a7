"""Architectures of the reference loop: a built-in small CNN and a tiny ViT, and how to read a
model's blocks.

Book: chapter "Linear probes", the PyTorch reference loop; seed 000, "In PyTorch".

* :class:`SmallCNN` is the offline default: a three-block convolutional network with
  BatchNorm (so that evaluation mode matters) for 8x8 ``load_digits`` images. The loop
  trains it for a few epochs (:func:`repeval_ref.cli.pretrain.pretrain_encoder`), or
  uses it at random initialisation.
* :class:`SmallResNet` is a ResNet-style encoder (a stem, stages of
  :class:`ResidualBlock` that halve the resolution, a global average pool) of some
  0.3-1 M parameters: the convolutional backbone of the zoo's plateau recipes.
* :class:`TinyViT` is a ViT-shaped module (patch embedding, class token, ``blocks``
  of :class:`TransformerBlock` that return token sequences). It stands in for a real
  ViT in tests of hooks, pooling and layer choice, since neither torchvision nor timm
  is required, and it is the architecture of the zoo's ViTs.
* :func:`default_blocks` names a model's blocks (read from the modules themselves, so
  torchvision's ``encoder.layers.encoder_layer_<i>`` comes out right) and
  :func:`default_prefix_tokens` says how many class/register tokens precede the patch
  tokens (timm's ``num_prefix_tokens``), which the ``"mean"`` pooling leaves out.

Loading torchvision, timm or zoo backbones by name is :mod:`repeval_ref.backbones`,
one floor above this package; the digits images are :func:`repeval_ref.datasets.digits_images`.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from .._validation import check_bool, check_divisor, check_int

__all__ = [
    "SmallCNN",
    "SmallResNet",
    "ResidualBlock",
    "TinyViT",
    "TransformerBlock",
    "default_blocks",
    "default_prefix_tokens",
]


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
                    nn.Conv2d(
                        chans[i], chans[i + 1], 3, stride=1 if i == 0 else 2, padding=1, bias=False
                    ),
                    nn.BatchNorm2d(chans[i + 1]),
                    nn.ReLU(inplace=False),
                )
            )
        self.blocks = nn.ModuleList(blocks)
        self.out_dim = chans[-1]

    def feature_map(self, x):
        """Output of the last block, shape (b, 4 * width, H / 4, W / 4) (rounded up)."""
        if (
            not isinstance(x, torch.Tensor)
            or x.ndim != 4
            or x.shape[1] != self.blocks[0][0].in_channels
        ):
            shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(
                f"x must be an image tensor of shape (b, {self.blocks[0][0].in_channels}, H, W), "
                f"got {shape}"
            )
        for block in self.blocks:
            x = block(x)
        return x

    def forward(self, x):
        return self.feature_map(x).mean(dim=(2, 3))


def _norm_layer(norm, channels, groups):
    """``BatchNorm2d(channels)`` or ``GroupNorm(groups, channels)``."""
    if norm == "batch":
        return nn.BatchNorm2d(channels)
    return nn.GroupNorm(groups, channels)


class ResidualBlock(nn.Module):
    """A ResNet basic block: ``relu(norm(conv(relu(norm(conv(x))))) + shortcut(x))``.

    Two 3x3 convolutions (the first with stride ``stride``); the shortcut is the
    identity, or a strided 1x1 convolution and a normalisation when the shape changes.
    Input ``(b, c_in, H, W)`` -> output ``(b, c_out, ceil(H / stride), ceil(W / stride))``.

    Parameters
    ----------
    c_in, c_out : int
        Input and output channels.
    stride : int
        1 or 2.
    norm : {"batch", "group"}
        BatchNorm or GroupNorm after each convolution.
    groups : int
        Groups of the GroupNorm (``c_out`` must be divisible by it); unused for BatchNorm.
    """

    def __init__(self, c_in, c_out, stride=1, norm="batch", groups=8):
        super().__init__()
        c_in = check_int(c_in, "c_in", minimum=1)
        c_out = check_int(c_out, "c_out", minimum=1)
        stride = check_int(stride, "stride", minimum=1, maximum=2)
        if norm not in ("batch", "group"):
            raise ValueError(f"norm must be 'batch' or 'group', got {norm!r}")
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False)
        self.norm1 = _norm_layer(norm, c_out, groups)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, stride=1, padding=1, bias=False)
        self.norm2 = _norm_layer(norm, c_out, groups)
        self.shortcut = nn.Identity()
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(
                nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False),
                _norm_layer(norm, c_out, groups),
            )

    def forward(self, x):
        y = torch.relu(self.norm1(self.conv1(x)))
        return torch.relu(self.norm2(self.conv2(y)) + self.shortcut(x))


class SmallResNet(nn.Module):
    """A small ResNet-style encoder returning globally pooled features.

    A stem ``conv3x3 -> norm -> ReLU`` to ``widths[0]`` channels at full resolution,
    then one stage per entry of ``widths``: ``depths[i]`` :class:`ResidualBlock` s, the
    first of every stage with stride 2 (28 -> 14 -> 7 -> 4 for three stages). For an
    input of shape ``(b, in_channels, H, W)`` the last feature map has ``widths[-1]``
    channels and the resolution halved once per stage (rounded up); ``forward`` returns
    its global average, shape ``(b, widths[-1])``. The stages are ``self.blocks[i]``,
    so hooks (and :func:`default_blocks`) read every stage's feature map.

    Parameters
    ----------
    in_channels : int
        Input channels (1 for Fashion-MNIST).
    widths : sequence of int
        Channels of each stage (e.g. ``(32, 64, 128)``).
    depths : sequence of int
        Residual blocks per stage, same length as ``widths``, each >= 1.
    norm : {"batch", "group"}
        Normalisation layer after every convolution.
    groups : int
        Groups of the GroupNorm; every width must be divisible by it.
    """

    def __init__(
        self, in_channels=1, widths=(32, 64, 128), depths=(1, 1, 2), norm="batch", groups=8
    ):
        super().__init__()
        in_channels = check_int(in_channels, "in_channels", minimum=1)
        widths = [check_int(w, "widths", minimum=1) for w in widths]
        depths = [check_int(d, "depths", minimum=1) for d in depths]
        if not widths or len(widths) != len(depths):
            raise ValueError(
                f"widths and depths must be non-empty and of the same length, got "
                f"{widths} and {depths}"
            )
        if norm not in ("batch", "group"):
            raise ValueError(f"norm must be 'batch' or 'group', got {norm!r}")
        groups = check_int(groups, "groups", minimum=1)
        if norm == "group" and any(w % groups for w in widths):
            raise ValueError(f"groups={groups} must divide every width of {widths}")
        self.in_channels = in_channels
        self.stem = nn.Sequential(
            nn.Conv2d(in_channels, widths[0], 3, padding=1, bias=False),
            _norm_layer(norm, widths[0], groups),
            nn.ReLU(),
        )
        stages, c_in = [], widths[0]
        for w, d in zip(widths, depths):
            blocks = [
                ResidualBlock(c_in if j == 0 else w, w, 2 if j == 0 else 1, norm, groups)
                for j in range(d)
            ]
            stages.append(nn.Sequential(*blocks))
            c_in = w
        self.blocks = nn.ModuleList(stages)
        self.out_dim = widths[-1]

    def feature_map(self, x):
        """Output of the last stage, shape (b, widths[-1], H / 2^s, W / 2^s) for s stages (rounded
        up)."""
        if not isinstance(x, torch.Tensor) or x.ndim != 4 or x.shape[1] != self.in_channels:
            shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(
                f"x must be an image tensor of shape (b, {self.in_channels}, H, W), got {shape}"
            )
        x = self.stem(x)
        for stage in self.blocks:
            x = stage(x)
        return x

    def forward(self, x):
        return self.feature_map(x).mean(dim=(2, 3))


class TransformerBlock(nn.Module):
    """Pre-norm transformer block: tokens (b, t, dim) -> tokens (b, t, dim).

    ``x + attn(norm1(x))``, then ``+ mlp(norm2(.))`` with a GELU MLP of width
    ``mlp_ratio * dim``. It is public because it is the block of :class:`TinyViT` and,
    with the same layout, of the MAE decoder (:mod:`repeval_ref.zoo.mae`) and of test
    stand-ins for torchvision's ViT encoder.

    Parameters
    ----------
    dim : int
        Token width; divisible by ``heads``.
    heads : int
        Attention heads.
    mlp_ratio : int
        Hidden width of the MLP over ``dim``.
    """

    def __init__(self, dim, heads, mlp_ratio):
        super().__init__()
        dim = check_int(dim, "dim", minimum=1)
        heads = check_divisor(heads, "heads", dim, "dim")
        mlp_ratio = check_int(mlp_ratio, "mlp_ratio", minimum=1)
        self.norm1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(
            nn.Linear(dim, mlp_ratio * dim), nn.GELU(), nn.Linear(mlp_ratio * dim, dim)
        )

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

    def __init__(
        self, image_size=8, patch_size=2, in_channels=1, dim=32, depth=4, heads=4, mlp_ratio=2
    ):
        super().__init__()
        image_size = check_int(image_size, "image_size", minimum=1)
        patch_size = check_divisor(patch_size, "patch_size", image_size, "image_size")
        dim = check_int(dim, "dim", minimum=1)
        depth = check_int(depth, "depth", minimum=1)
        heads = check_divisor(heads, "heads", dim, "dim")
        n_patches = (image_size // patch_size) ** 2
        self.patch_embed = nn.Conv2d(in_channels, dim, patch_size, stride=patch_size)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(0.02 * torch.randn(1, 1 + n_patches, dim))
        self.blocks = nn.ModuleList(TransformerBlock(dim, heads, mlp_ratio) for _ in range(depth))
        self.norm = nn.LayerNorm(dim)
        self.out_dim = dim

    def _check_images(self, x):
        if not isinstance(x, torch.Tensor) or x.ndim != 4:
            shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(f"x must be an image tensor of shape (b, c, H, W), got {shape}")
        c_in, ps = self.patch_embed.in_channels, self.patch_embed.kernel_size[0]
        if (
            x.shape[1] != c_in
            or x.shape[2] % ps
            or x.shape[3] % ps
            or x.shape[2] < ps
            or x.shape[3] < ps
        ):
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
        side = int(round(n**0.5))
        if grid_h * grid_w == n and grid_h == grid_w == side:
            return self.pos_embed
        patch = self.pos_embed[:, 1:].reshape(1, side, side, -1).permute(0, 3, 1, 2)
        patch = nn.functional.interpolate(
            patch, size=(grid_h, grid_w), mode="bicubic", align_corners=False
        )
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

    def forward_tokens(self, x, pre_norm=False):
        """Tokens after the last block, shape (b, 1 + p, dim): class token first, then the patches.

        Parameters
        ----------
        x : torch.Tensor of shape (b, c, H, W)
        pre_norm : bool, default False
            ``False`` returns the encoder's output, the last block's tokens passed through
            the final LayerNorm ``self.norm``. ``True`` returns the residual stream itself,
            the same tokens *before* that normalisation, so that
            ``self.norm(forward_tokens(x, pre_norm=True))`` is ``forward_tokens(x)``.

        Notes
        -----
        Read the token norms from ``pre_norm=True``. A LayerNorm centres and rescales every
        token to the same norm before its affine map (``sqrt(dim)`` up to ``eps``), so after
        it each token's norm is bounded by the spread of the affine weights, whatever the
        token was: a high-norm artifact token (Darcet et al. 2024) is visible only before
        the final normalisation (:func:`repeval_ref.high_norm_tokens`).
        """
        pre_norm = check_bool(pre_norm, "pre_norm")
        t = self.tokens(x)
        for block in self.blocks:
            t = block(t)
        return t if pre_norm else self.norm(t)

    def forward(self, x):
        return self.forward_tokens(x)[:, 0]


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
    names = [
        name
        for name, child in model.named_children()
        if name in ("layer1", "layer2", "layer3", "layer4")
    ]
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

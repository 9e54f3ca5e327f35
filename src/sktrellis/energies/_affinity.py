"""Pairwise similarities from features, shared by the energy models."""
import numpy as np
from scipy.spatial.distance import pdist, squareform

from .._engine.resources import check_memory
from .._validation import check_square_matrix

AFFINITIES = ("rbf", "exponential", "precomputed")


def similarity_matrix(X, affinity, gamma, *, allow_negative):
    """Pairwise similarities of the rows of X, or X itself when precomputed.

    ``"rbf"``: exp(-gamma ||x_i - x_j||**2), default gamma = 1 / median of
    the squared pairwise distances. ``"exponential"``: exp(-gamma
    ||x_i - x_j||), default gamma = 1 / median distance (the similarity of
    the flat cluster trellis paper). The median heuristic makes a typical
    pair similarity exp(-1) whatever the scale of the features.
    ``"precomputed"``: X itself, checked square, symmetric and finite.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features) or (n_samples, n_samples)
        Finite features, or the similarity matrix when precomputed.
    affinity : {"rbf", "exponential", "precomputed"}
        How similarities follow from X.
    gamma : float or None
        Inverse length scale of the kernel; None for the median heuristic.
        Ignored when precomputed.
    allow_negative : bool
        Whether a precomputed matrix may have negative entries (correlation
        clustering's repulsions) or not (Dasgupta's cost).

    Returns
    -------
    similarities : ndarray of shape (n_samples, n_samples)
        Symmetric; computed similarities are in [0, 1] with a zero diagonal,
        a precomputed matrix is returned as checked.
    """
    if affinity == "precomputed":
        return check_square_matrix(X, "affinity", allow_negative=allow_negative)
    if affinity not in ("rbf", "exponential"):
        raise ValueError(f"affinity must be one of {AFFINITIES}, got {affinity!r}")
    X = np.asarray(X, dtype=np.float64)
    if not np.all(np.isfinite(X)):
        # Checked here too, not only by the estimators: an energy may be
        # called directly, and NaN would surface later as an "overflow".
        where = tuple(int(i) for i in np.argwhere(~np.isfinite(X))[0])
        raise ValueError(
            f"X contains {X[where]} at index {where}; the {affinity!r} affinity needs "
            "finite features: remove or impute such rows"
        )
    # Distances are computed on X divided by a power of two that brings its
    # largest entry near 1 (exact in floating point), so features of 1e155
    # or 1e-300 neither overflow nor underflow; gamma is rescaled to match.
    # The condensed distances, their exponents and similarities (half a
    # square each) and the square matrix: about 2.5 squares at the peak.
    n_points = len(X)
    check_memory(n_points, 20 * n_points**2, f"the {affinity!r} affinity",
                 holds=f"the {n_points} x {n_points} pairwise similarities",
                 way_out="use fewer points")
    power = 2 if affinity == "rbf" else 1
    _, exponent = np.frexp(np.max(np.abs(X))) if X.size else (0.0, 0)
    metric = "sqeuclidean" if affinity == "rbf" else "euclidean"
    distances = pdist(np.ldexp(X, -int(exponent)), metric)
    if gamma is None:
        # The median heuristic is scale-free: the rescaled median will do.
        scale = np.median(distances) if distances.size else 0.0
        gamma = 1.0 / scale if scale > 0 else 1.0
        exponents = gamma * distances
    else:
        with np.errstate(over="ignore", invalid="ignore"):
            exponents = np.ldexp(gamma * distances, power * int(exponent))
        # gamma rescaled to infinity meets distance 0 for duplicate points.
        exponents[distances == 0] = 0.0
    similarities = squareform(np.exp(-exponents))
    np.fill_diagonal(similarities, 0.0)
    return similarities

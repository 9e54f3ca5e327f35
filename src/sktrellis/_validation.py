"""Checks of user input shared by every estimator and energy: the one validation path.

Shapes, values and members only; what the host can hold is
``sktrellis._engine.resources``.
"""
import numpy as np


def check_square_matrix(matrix, name, *, allow_negative):
    """A finite, square, symmetric float64 matrix, or a ValueError naming the problem."""
    matrix = np.asarray(matrix, dtype=np.float64)
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1]:
        raise ValueError(
            f"a precomputed {name} matrix must be square, got shape {matrix.shape}"
        )
    if not np.all(np.isfinite(matrix)):
        raise ValueError(f"the precomputed {name} matrix contains NaN or infinity")
    if not np.allclose(matrix, matrix.T, rtol=1e-10, atol=1e-12):
        worst = np.unravel_index(np.argmax(np.abs(matrix - matrix.T)), matrix.shape)
        raise ValueError(
            f"the precomputed {name} matrix must be symmetric; entries {worst} and "
            f"{worst[::-1]} are {matrix[worst]!r} and {matrix[worst[::-1]]!r}"
        )
    if not allow_negative and np.any(matrix < 0):
        raise ValueError(
            f"the precomputed {name} matrix has negative entries (min "
            f"{matrix.min()!r}); this energy needs non-negative similarities"
        )
    return matrix


def check_log_potentials(values, source, shape, unit):
    """``values`` as float64 of ``shape``, each finite or -inf, or a ValueError.

    The one rule for every log potential an energy hands to a kernel: -inf
    forbids a split or cluster (its trees or partitions get probability
    zero), while NaN or +inf would silently corrupt log Z.

    Parameters
    ----------
    values : array-like
        Log potentials as returned by ``source``.
    source : str
        What returned them, for the message (e.g. "SplitEnergy function").
    shape : tuple of int
        The shape they must have: one value per ``unit``.
    unit : {"split", "cluster"}
        What one value is the log potential of.

    Returns
    -------
    values : ndarray of float64
    """
    values = np.asarray(values, dtype=np.float64)
    if values.shape != tuple(shape):
        raise ValueError(
            f"{source} returned shape {values.shape} for {int(np.prod(shape))} {unit}s; "
            f"it must return one value per {unit}"
        )
    bad = np.isnan(values) | (values == np.inf)
    if bad.any():
        index = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"{source} returned {values.flat[index]} at index {index}; log potentials "
            f"must be finite or -inf (a forbidden {unit}), never NaN or +inf"
        )
    return values


def unit_exponent(*arrays):
    """e such that every entry divided by 2**e is below 1 in magnitude (0 for all zeros).

    Dividing by a power of two is exact in floating point, so a model that
    is invariant to the scale of the features up to a known constant can
    work on ``np.ldexp(X, -e)``: features anywhere in float64's range give
    the answer of the same data at unit scale, without overflow in squares.
    """
    largest = max((float(np.max(np.abs(a))) for a in arrays if np.size(a)), default=0.0)
    return int(np.frexp(largest)[1]) if largest > 0 else 0


def check_no_overflow(values, owner, what, advice):
    """A ValueError saying what overflowed float64, instead of NaN further on.

    Parameters
    ----------
    values : ndarray
        Statistics derived from the data (sums over subsets, second moments).
    owner : str
        Who computed them, e.g. ``"Dasgupta"``.
    what : str
        What they are, e.g. ``"the similarity sums over subsets"``.
    advice : str
        How to bring the data into range.
    """
    if not np.all(np.isfinite(values)):
        raise ValueError(
            f"{owner}: {what} overflow float64 (largest finite double is 1.8e308) "
            f"for this data; {advice}"
        )


def check_members(members, n_points):
    """Point indices of a cluster given as indices or a boolean mask, validated."""
    members = np.asarray(members)
    if members.dtype == bool:
        if members.shape != (n_points,):
            raise ValueError(
                f"a boolean cluster mask must have shape ({n_points},), got {members.shape}"
            )
        members = np.flatnonzero(members)
    members = members.ravel()
    if members.size == 0:
        raise ValueError("a cluster needs at least one member")
    if not np.issubdtype(members.dtype, np.integer):
        raise ValueError(f"cluster members must be point indices, got dtype {members.dtype}")
    if members.min() < 0 or members.max() >= n_points:
        raise ValueError(
            f"cluster members must be indices in [0, {n_points}), got "
            f"{members.min()}..{members.max()}"
        )
    if len(np.unique(members)) != members.size:
        raise ValueError("cluster members must not repeat")
    return members


def data_sketch(X):
    """A cheap fingerprint of the rows of X: their projections on a fixed random direction.

    Transductive clusterers store it at fit so that scorers can refuse data
    they were not fitted on, even of the same shape (a held-out fold).
    Comparing sketches with a tolerance, rather than hashes, lets a
    pipeline's ``transform`` reproduce its ``fit_transform`` up to rounding.
    """
    X = np.asarray(X, dtype=np.float64).reshape(len(X), -1)
    direction = np.random.default_rng(0).standard_normal(X.shape[1])
    return X @ direction

"""Checks shared by every estimator and energy: the one validation path."""
import os

import numpy as np

# The exact estimators' cap on N, the same on every host: the trellis costs
# about 3**N / 2 split evaluations and 2**N table entries, so N = 25 is about
# 4e11 evaluations (10-20 minutes on two cores) and 2-3 GiB, and every extra
# point triples the time. A larger host does not make N = 30 (1e14
# evaluations) practical, so the cap does not depend on the memory found.
MAX_EXACT_POINTS = 25


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


def available_memory_bytes():
    """Memory this process can still get, from /proc/meminfo where available."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def format_bytes(n_bytes):
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n_bytes < 1024 or unit == "PiB":
            return f"{n_bytes:.0f} {unit}" if unit == "bytes" else f"{n_bytes:.1f} {unit}"
        n_bytes /= 1024


def check_exact_size(n_points, bytes_needed, owner, *, way_out="SparseTrellisClustering"):
    """Refuse sizes the exact trellis cannot hold, with a message that says what to do.

    Above MAX_EXACT_POINTS always (whatever the host), and below it when
    ``bytes_needed`` exceeds 90 % of the memory available now.
    """
    if n_points > MAX_EXACT_POINTS:
        raise ValueError(
            f"{owner} enumerates all 2**N subsets of the points: n_samples={n_points} "
            f"would need {format_bytes(bytes_needed)} and about {3**n_points / 2:.1e} "
            f"split evaluations, and at most {MAX_EXACT_POINTS} points are supported; "
            f"use {way_out} for larger data"
        )
    available = available_memory_bytes()
    if available is not None and bytes_needed > 0.9 * available:
        raise ValueError(
            f"{owner} needs 2**N subsets of memory: n_samples={n_points} requires "
            f"{format_bytes(bytes_needed)} but only {format_bytes(available)} is "
            f"available; use fewer points or {way_out}"
        )


def effective_n_threads(n_jobs):
    """OpenMP threads for n_jobs with joblib's conventions (None -> all cores)."""
    try:
        n_cpus = len(os.sched_getaffinity(0))
    except AttributeError:
        n_cpus = os.cpu_count() or 1
    if n_jobs is None:
        return n_cpus
    if n_jobs < 0:
        return max(1, n_cpus + 1 + n_jobs)
    return min(n_jobs, n_cpus) if n_jobs > 0 else 1


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

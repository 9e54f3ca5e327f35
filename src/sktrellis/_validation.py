"""Checks shared by every estimator and energy: the one validation path."""
import os

import numpy as np

# The exact estimators' structural limit on N, the same on every host: the
# trellises index subsets by 32-bit masks (split potentials hold at most 30
# points) and count trees in 128 bits, which hold (2N - 3)!! up to N = 29.
# Below it, what bounds N is the host's memory (check_memory: 2**N table
# entries of a few tens of bytes) and time (about 3**N / 2 split
# evaluations, announced before a long pass); benchmarks/README.md gives
# the figures for N = 26-29.
MAX_EXACT_POINTS = 29


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


# Where the kernel says what a process may still allocate. Module-level so
# that tests can point them at a fake tree.
PROC_MEMINFO = "/proc/meminfo"
PROC_SELF_STATUS = "/proc/self/status"
PROC_SELF_CGROUP = "/proc/self/cgroup"
CGROUP_ROOT = "/sys/fs/cgroup"

# cgroup v1 writes "no limit" as the largest page-aligned int64.
_NO_CGROUP_LIMIT = 2**62


def _read_int(path):
    """The integer in a one-line file, None for "max", a missing file or junk."""
    try:
        with open(path) as file:
            text = file.read().strip()
        return int(text)
    except (OSError, ValueError):
        return None


def _status_bytes(field):
    """A ``VmSize``-like field of /proc/self/status in bytes, or None."""
    try:
        with open(PROC_SELF_STATUS) as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _cgroup_memory_left():
    """Bytes left under this process's cgroup memory limits (v2 memory.max, v1 limit_in_bytes).

    Every ancestor cgroup's limit binds too, so the smallest room over the
    path from the process's cgroup to the root counts; a container often
    sees its own cgroup as the root of the mount, so the mount root is
    tried as well. None when no limit is set or nothing is readable.
    """
    try:
        with open(PROC_SELF_CGROUP) as cgroup:
            lines = cgroup.read().splitlines()
    except OSError:
        return None
    candidates = []
    for line in lines:
        hierarchy_id, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hierarchy_id == "0" and controllers == "":
            candidates.append((CGROUP_ROOT, path, "memory.max", "memory.current"))
            candidates.append((os.path.join(CGROUP_ROOT, "unified"), path, "memory.max",
                               "memory.current"))
        elif "memory" in controllers.split(","):
            candidates.append((os.path.join(CGROUP_ROOT, "memory"), path,
                               "memory.limit_in_bytes", "memory.usage_in_bytes"))
    left = None
    for root, path, limit_file, usage_file in candidates:
        parts = [part for part in path.split("/") if part]
        for depth in range(len(parts), -1, -1):
            directory = os.path.join(root, *parts[:depth])
            limit = _read_int(os.path.join(directory, limit_file))
            if limit is None or limit >= _NO_CGROUP_LIMIT:
                continue
            usage = _read_int(os.path.join(directory, usage_file)) or 0
            room = max(limit - usage, 0)
            left = room if left is None else min(left, room)
    return left


def memory_limits():
    """What this process can still allocate, by the limit that says so.

    Returns
    -------
    limits : list of (str, int)
        Each limit found and the bytes left under it: the host's
        ``MemAvailable``, the process limits ``RLIMIT_AS`` and
        ``RLIMIT_DATA`` (``ulimit -v``, ``ulimit -d``) less what the process
        already maps, and a cgroup's ``memory.max`` (v2) or
        ``memory.limit_in_bytes`` (v1) less its usage. Empty when none is
        readable.
    """
    limits = []
    try:
        with open(PROC_MEMINFO) as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    limits.append(("MemAvailable", int(line.split()[1]) * 1024))
                    break
    except (OSError, ValueError, IndexError):
        pass
    if not limits:
        try:
            limits.append(("available pages",
                           os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")))
        except (ValueError, OSError, AttributeError):
            pass
    try:
        import resource
    except ImportError:  # not on Windows
        resource = None
    if resource is not None:
        for name, field, command in (("RLIMIT_AS", "VmSize", "ulimit -v"),
                                     ("RLIMIT_DATA", "VmData", "ulimit -d")):
            soft, _ = resource.getrlimit(getattr(resource, name))
            if soft == resource.RLIM_INFINITY:
                continue
            used = _status_bytes(field) or 0
            limits.append((f"the process limit {name} ({command})", max(soft - used, 0)))
    cgroup_left = _cgroup_memory_left()
    if cgroup_left is not None:
        limits.append(("the cgroup's memory.max", cgroup_left))
    return limits


def available_memory_bytes():
    """Bytes this process can still allocate: the tightest of ``memory_limits()``, or None."""
    limits = memory_limits()
    return min(left for _, left in limits) if limits else None


def memory_budget(share, unknown):
    """A share of what this process can still allocate, for a cap rather than a refusal.

    Returns ``(budget, available)``: ``share`` of ``available_memory_bytes()``
    (``unknown`` when no limit is readable) and that figure (or None).
    """
    available = available_memory_bytes()
    return (unknown if available is None else int(share * available)), available


def fits_in_memory(bytes_needed):
    """Whether an allocation of ``bytes_needed`` is at most 90 % of what this process can get.

    The test behind ``check_memory``, for a caller that picks another way
    instead of refusing (True when no limit is known).
    """
    available = available_memory_bytes()
    return available is None or bytes_needed <= 0.9 * available


def check_memory(n_points, bytes_needed, owner, *, holds, way_out):
    """Refuse an allocation above 90 % of what this process can still get, before it starts.

    The one memory refusal of the package: it names n_samples, the bytes,
    the limit that binds (host memory, a process limit or a cgroup) and
    what to do.

    Parameters
    ----------
    n_points : int
        n_samples of the fit.
    bytes_needed : int
        What the fit will allocate.
    owner : str
        Who allocates, e.g. ``"ExactHierarchicalClustering"``.
    holds : str
        What the memory holds, e.g. ``"2**N subsets"``.
    way_out : str
        What to do instead, e.g. ``"use fewer points or SparseTrellisClustering"``.
    """
    if fits_in_memory(bytes_needed):
        return
    source, available = min(memory_limits(), key=lambda limit: limit[1])
    raise_limit = "" if source in ("MemAvailable", "available pages") else (
        f", or raise {source.removeprefix('the ')}")
    raise ValueError(
        f"{owner} needs memory for {holds}: n_samples={n_points} requires "
        f"{format_bytes(bytes_needed)} but only {format_bytes(available)} is "
        f"available under {source}; {way_out}{raise_limit}"
    )


def format_bytes(n_bytes):
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n_bytes < 1024 or unit == "PiB":
            return f"{n_bytes:.0f} {unit}" if unit == "bytes" else f"{n_bytes:.1f} {unit}"
        n_bytes /= 1024


def check_exact_size(n_points, bytes_needed, owner, *, way_out="SparseTrellisClustering",
                     bytes_for=None):
    """Refuse sizes the exact trellis cannot hold, with a message that says what to do.

    Above MAX_EXACT_POINTS always (whatever the host), and below it when
    ``bytes_needed`` exceeds 90 % of the memory available now. Given
    ``bytes_for`` (n_points -> bytes), the memory refusal also names the
    largest n_samples that would fit.
    """
    if n_points > MAX_EXACT_POINTS:
        raise ValueError(
            f"{owner} enumerates all 2**N subsets of the points: n_samples={n_points} "
            f"would need {format_bytes(bytes_needed)} and about {3**n_points / 2:.1e} "
            f"split evaluations, and at most {MAX_EXACT_POINTS} points are supported "
            f"(32-bit subset masks, 128-bit tree counts); use {way_out} for larger data"
        )
    fits = ""
    if bytes_for is not None and not fits_in_memory(bytes_needed):
        largest = max((n for n in range(1, n_points) if fits_in_memory(bytes_for(n))),
                      default=None)
        if largest is not None:
            fits = f" (n_samples={largest} would fit)"
    check_memory(n_points, bytes_needed, owner, holds="2**N subsets",
                 way_out=f"use fewer points{fits} or {way_out}")


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

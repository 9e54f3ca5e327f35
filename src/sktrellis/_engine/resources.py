"""What a fit needs and what this host has: memory, thread counts and the refusals.

The one module that probes the host: what this process can still allocate
(``MemAvailable``, the ``RLIMIT_AS``/``RLIMIT_DATA`` process limits, a
cgroup v1 or v2 memory limit) and how many cores it may run on. It also
accounts for a fit's peak memory from what the energy describes of itself
(``potential_kind``, ``table_bytes_per_subset``, ``scratch_bytes``,
``statistics_per_subset``, ``scratch_advice``) and the trellises' own
per-subset figures, so that estimators refuse a fit here, before
allocating anything, with a message that names n_samples, the bytes, the
limit that binds and the way out.
"""
import os

from .trellis.flat_trellis import flat_trellis_bytes
from .trellis.hierarchical_trellis import hierarchical_trellis_bytes
# One way of writing a size in every message, the trellis's progress lines included.
from .trellis.levels import format_bytes

# The exact estimators' structural limit on N, the same on every host: the
# trellises index subsets by 32-bit masks (split potentials hold at most 30
# points) and count trees in 128 bits, which hold (2N - 3)!! up to N = 29.
# Below it, what bounds N is the host's memory (check_memory: 2**N table
# entries of a few tens of bytes) and time (about 3**N / 2 split
# evaluations, announced before a long pass); benchmarks/README.md gives
# the figures for N = 26-29.
MAX_EXACT_POINTS = 29


###############################################################################
# The host: what this process may still allocate, and on how many cores

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


###############################################################################
# A fit's peak memory, from the energy's description of itself

def hierarchical_fit_bytes(energy, n_points):
    """Peak memory of an exact hierarchical fit and all its queries, in bytes.

    Parameters
    ----------
    energy : HierarchicalEnergy
        Read for its ``potential_kind``, ``table_bytes_per_subset`` (of a
        "function" potential) and ``scratch_bytes(n_points)``.
    n_points : int
        n_samples of the fit.

    Returns
    -------
    n_bytes : int
        The potential's tables, the trellis and the largest of the
        temporaries of its passes and queries, plus what the energy
        allocates while building its tables.
    """
    return (
        hierarchical_trellis_bytes(
            energy.potential_kind, n_points, energy.table_bytes_per_subset
        )
        + energy.scratch_bytes(n_points)
    )


def flat_fit_bytes(energy, n_points, n_features=None):
    """Peak memory of an exact flat fit and all its queries, in bytes.

    Parameters
    ----------
    energy : FlatEnergy
        Read for its ``table_bytes_per_subset`` and
        ``scratch_bytes(n_points, n_features)``.
    n_points : int
        n_samples of the fit.
    n_features : int, default=None
        Counted when given (an energy's statistics may grow with it); None
        counts what does not depend on the features.

    Returns
    -------
    n_bytes : int
        The energy's table, the flat trellis and the energy's scratch.
    """
    return (
        (energy.table_bytes_per_subset << n_points)
        + flat_trellis_bytes(n_points)
        + energy.scratch_bytes(n_points, n_features)
    )


def check_hierarchical_fit(energy, n_points, owner):
    """Refuse an exact hierarchical fit that cannot be held, naming what would fit.

    Parameters
    ----------
    energy : HierarchicalEnergy
        The fit's energy (see ``hierarchical_fit_bytes``).
    n_points : int
        n_samples of the fit.
    owner : str
        The estimator, for the message.
    """
    check_exact_size(n_points, hierarchical_fit_bytes(energy, n_points), owner,
                     bytes_for=lambda n: hierarchical_fit_bytes(energy, n))


def check_flat_fit(energy, n_points, n_features, owner, *, way_out="SparseTrellisClustering"):
    """Refuse an exact flat fit that cannot be held, first by N, then by its features.

    The table of all subsets and the flat trellis are checked first (naming
    the largest n_samples that would fit), then the energy's statistics at
    ``n_features`` (naming the energy's own way out, such as a cheaper
    covariance type).

    Parameters
    ----------
    energy : FlatEnergy
        The fit's energy (see ``flat_fit_bytes``).
    n_points : int
        n_samples of the fit.
    n_features : int
        n_features of the fit.
    owner : str
        The estimator, for the message.
    way_out : str, default="SparseTrellisClustering"
        What to use for larger data.
    """
    check_exact_size(n_points, flat_fit_bytes(energy, n_points), owner, way_out=way_out,
                     bytes_for=lambda n: flat_fit_bytes(energy, n))
    check_statistics_memory(energy, n_points, n_features, owner)


def check_statistics_memory(energy, n_points, n_features, owner):
    """Refuse a flat energy's statistics of all subsets that would not fit at n_features.

    Parameters
    ----------
    energy : FlatEnergy
        Read for ``statistics_per_subset(n_features)`` and
        ``scratch_advice``, besides what ``flat_fit_bytes`` reads.
    n_points : int
        n_samples of the fit.
    n_features : int
        n_features of the fit.
    owner : str
        Who allocates, for the message.
    """
    needed = flat_fit_bytes(energy, n_points, n_features)
    if fits_in_memory(needed):
        return
    check_memory(
        n_points, needed, owner,
        holds=(f"the {type(energy).__name__} statistics of all subsets at n_features="
               f"{n_features} ({energy.statistics_per_subset(n_features)} per subset)"),
        way_out=energy.scratch_advice,
    )

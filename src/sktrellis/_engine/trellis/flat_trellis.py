"""The full flat trellis: DP tables over all 2**N subsets and their queries.

Drives the kernels of ``_flat.pyx`` level by level (subsets of one size at a
time) so Ctrl-C is honoured between chunks of a level and ``verbose`` shows
a progress bar. The passes sharing the level loop: the plain inside pass
(log Z, MAP), the passes with a cluster-count dimension (log Z for every
number of clusters, and the MAP for a fixed number), and the max-only pass
of `map_partition` (the MAP partition alone).
"""
import functools
import math

import numpy as np
from scipy.special import logsumexp

from . import _flat as kernels
from .._subsets import count_as_int, subsets_by_size
from ..tables import check_restored_tables
from .levels import SECONDS_PER_TERM, LevelProgress, RowBlocks, threads_for
from .cluster_queries import members_mask, most_probable_masks, submasks

# The sampler caches the cumulative cluster weights of subsets it meets
# twice, in a buffer of this many doubles or one per subset, whichever is
# more. np.empty only commits the pages the sampler writes.
_SAMPLE_CACHE_DOUBLES = 1 << 22
# Bytes per subset of the tables below: the per-size scaled energies, log Z,
# log MAP, MAP cluster, subsets by size, offsets, two 16-byte factor
# records, 128-bit partition counts, and temporaries. After fit, log Z, the
# cluster marginals, and the sampler's cache index and cache fit in the
# same budget.
_BYTES_PER_SUBSET = 112
# Bytes per (subset, number of clusters) entry of the count pass: log Z(S, j)
# and its scaled copy, for the subsets without point 0 and the full set:
# (N - 1) 2**(N-2) + N entries. The max-only table of a
# fit with n_clusters=k (8 k bytes per subset, k <= N) is never larger and
# is freed before the count pass can run.
_BYTES_PER_COUNT_ENTRY = 16
#: Low bits of a subset that index within a row of the cache-blocked passes
#: (see ``_flat.pyx``): a row pair of the inside pass is 2 x 2**BLOCK_BITS
#: 16-byte records, of the MAP-only pass 2 x 2**BLOCK_BITS doubles. 10 to
#: 12 bits measured within 10% of each other at N=20.
BLOCK_BITS = 11
#: Every flat pass is cache-blocked from this many points on (measured, one
#: thread: the inside and MAP-only passes 1.5-1.8x faster at N=16, 3.6-4.3x
#: at N=20; the count pass 2.2x at N=20).
BLOCKED_MIN_POINTS = 16


def bell_number(n_points):
    """Number of partitions of n_points labelled points (Bell triangle, exact)."""
    row = [1]
    for _ in range(n_points - 1):
        next_row = [row[-1]]
        for value in row:
            next_row.append(next_row[-1] + value)
        row = next_row
    return row[-1]


def flat_trellis_bytes(n_points):
    """Memory the flat trellis needs for n_points (energy table excluded), in bytes."""
    return (
        (_BYTES_PER_SUBSET << n_points)
        + _BYTES_PER_COUNT_ENTRY * ((n_points - 1) * (1 << n_points) // 4 + n_points)
        + 8 * _SAMPLE_CACHE_DOUBLES
    )


def _exp_shifted(values, shift):
    """exp(values - shift) with exp(-inf - -inf) taken as 0."""
    with np.errstate(invalid="ignore"):
        out = np.exp(np.subtract(values, shift))
    out[np.isnan(out)] = 0.0
    return out


class _Levels:
    """Subsets by size and per-size maxima of log E, shared by the passes.

    The maxima and the scaled energies are computed on first use: the
    MAP-only pass reads neither.
    """

    def __init__(self, log_e):
        self.log_e = log_e
        self.n_points = len(log_e).bit_length() - 1
        self.order, self.level_start = subsets_by_size(self.n_points)

    @functools.cached_property
    def sizes(self):
        return np.bitwise_count(np.arange(1 << self.n_points, dtype=np.uint32))

    @functools.cached_property
    def size_max(self):
        """Largest log E per cluster size."""
        size_max = np.full(self.n_points + 1, -np.inf)
        for size in range(1, self.n_points + 1):
            size_max[size] = self.log_e[self.level(size)].max()
        return size_max

    @functools.cached_property
    def cluster_scale(self):
        """exp(log E(C) - the largest log E of its size) of every cluster C."""
        cluster_scale = _exp_shifted(self.log_e, self.size_max[self.sizes])
        cluster_scale[0] = 0.0
        return cluster_scale

    def level(self, size):
        """The subsets of one size, in increasing mask order."""
        return self.order[self.level_start[size] : self.level_start[size + 1]]


class _InsidePass:
    """log Z, log MAP, the MAP cluster and partition counts of every subset."""

    def __init__(self, levels, n_threads):
        self.levels, self.n_threads = levels, n_threads
        n_subsets = 1 << levels.n_points
        self.log_z = np.zeros(n_subsets)
        self.log_map = np.zeros(n_subsets)
        self.best = np.zeros(n_subsets, dtype=np.uint32)
        # Exact counts of finite-potential partitions are only needed when
        # some cluster is forbidden; otherwise there are Bell(N) of them.
        self.counts = None
        if np.any(levels.log_e[1:] == -np.inf):
            self.counts = np.zeros((n_subsets, 2), dtype=np.uint64)
            self.counts[0, 0] = 1
        self.cluster_factors = np.zeros((n_subsets, 2))
        self.cluster_factors[:, 1] = levels.log_e
        self.rest_factors = np.zeros((n_subsets, 2))
        self.rest_factors[0] = (1.0, 0.0)
        self.best_z = np.full(levels.n_points + 1, -np.inf)   # largest log Z per size
        self.best_z[0] = 0.0
        # The blocked kernel keeps no counts: tables with a forbidden cluster
        # take the plain one.
        n_points = levels.n_points
        self.blocks = (
            RowBlocks(n_points, min(BLOCK_BITS, n_points), SECONDS_PER_TERM["flat"])
            if n_points >= BLOCKED_MIN_POINTS and self.counts is None else None
        )

    def level(self, size, parents, progress):
        levels = self.levels
        if size == 1:
            self.log_z[parents] = self.log_map[parents] = levels.log_e[parents]
            self.best[parents] = parents
            if self.counts is not None:
                self.counts[parents, 0] = np.isfinite(levels.log_e[parents])
            return
        # The level's log scale: the largest term any of its subsets can have.
        cluster_sizes = np.arange(1, size + 1)
        bounds = levels.size_max[cluster_sizes] + self.best_z[size - cluster_sizes]
        level_scale = bounds.max()
        if level_scale == -np.inf:
            # No cluster and rest are both feasible at this size.
            self.log_z[parents] = self.log_map[parents] = -np.inf
            return
        size_gain = np.zeros(size + 1)
        size_gain[1:] = _exp_shifted(bounds, level_scale)
        stop = levels.level_start[size + 1]
        kernels.scale_cluster_factors(
            levels.cluster_scale, levels.order, stop, size_gain, self.cluster_factors,
            threads_for(stop, self.n_threads),
        )
        threads = threads_for(len(parents) << (size - 1), self.n_threads)
        blocks = self.blocks
        if blocks is not None:
            for high_parts, low_sizes in blocks.inside_calls(size, progress):
                kernels.inside_level_blocked(
                    blocks.bits, high_parts, low_sizes, blocks.low_order, blocks.low_start,
                    levels.log_e, self.log_z, self.log_map, self.best, level_scale,
                    self.cluster_factors, self.rest_factors, threads,
                )
                progress.update(blocks.n_subsets(low_sizes) << (size - 1))
            # Subsets with no low bit, C(N - bits, size) of them: plain kernel.
            parents = blocks.high_only_parents(size)
        for block in progress.calls(parents, 1 << (size - 1), SECONDS_PER_TERM["flat"]):
            kernels.inside_level(
                block, levels.log_e, self.log_z, self.log_map,
                self.best, self.counts, level_scale, self.cluster_factors,
                self.rest_factors, threads,
            )
            progress.update(len(block) << (size - 1))

    def finish(self, size, parents):
        """Scale the finished level for the levels above it."""
        self.best_z[size] = self.log_z[parents].max()
        self.rest_factors[parents, 0] = _exp_shifted(self.log_z[parents], self.best_z[size])
        self.rest_factors[parents, 1] = self.log_map[parents]


def _reached(size, parents, n_points):
    """The subsets of a level that the full set's recursion reads.

    The cluster of a subset holds its lowest point, so the rest of the full
    set, and every rest below it, lacks point 0: only those subsets (and the
    full set) are needed, with sum_s C(N - 1, s) 2**(s-1) ~ 3**(N-1) / 2
    (subset, cluster) pairs, a third of the plain pass's. The plain pass
    still visits every subset: the cluster marginals read log Z of any
    complement.
    """
    return parents if size == n_points else parents[(parents & 1) == 0]


class _CountPass:
    """log Z(S, j) for every number of clusters j, S without point 0 or the full set."""

    def __init__(self, levels, n_threads):
        self.levels, self.n_threads = levels, n_threads
        n_points = levels.n_points
        # The row of subset S holds j = 1..|S| clusters; rows of one size are
        # contiguous, in increasing mask order. Subsets outside the pass have
        # no row and their offsets are never read.
        n_rows = [math.comb(max(n_points - 1, 0), size) for size in range(n_points + 1)]
        n_rows[n_points] = 1
        self.entry_start = np.zeros(n_points + 2, dtype=np.int64)
        self.entry_start[1:] = np.cumsum(np.multiply(n_rows, np.arange(n_points + 1)))
        self.offsets = np.zeros(1 << n_points, dtype=np.int64)
        n_entries = self.entry_start[-1]
        self.log_zk = np.empty(n_entries)
        self.scaled_zk = np.empty(n_entries)
        self.work = np.empty((n_threads, 5 * (n_points + 2)))
        self.spread = np.empty((n_threads, 2 << (n_points // 2)), dtype=np.uint32)
        self.binomial = np.array(
            [[math.comb(n, k) for k in range(n_points + 1)] for n in range(n_points + 1)],
            dtype=np.int64,
        )
        self.best_zk = np.full((n_points + 1, n_points + 1), -np.inf)   # [size, clusters]
        self.blocks = None
        if n_points >= BLOCKED_MIN_POINTS:
            self.blocks = RowBlocks(n_points, min(BLOCK_BITS, n_points - 1),
                                    SECONDS_PER_TERM["flat count"])
            # Running sums of every S_lo of an item, and the fallback's maxima.
            bits = self.blocks.bits
            self.block_work = np.empty(
                (n_threads, (math.comb(bits, bits // 2) + 1) * (n_points + 2))
            )

    def rows(self, size):
        return slice(self.entry_start[size], self.entry_start[size + 1])

    def level(self, size, parents, progress):
        levels = self.levels
        parents = _reached(size, parents, levels.n_points)
        self.offsets[parents] = self.entry_start[size] + size * np.arange(len(parents))
        if size == 1:
            self.log_zk[self.rows(1)] = levels.log_e[parents]
            return
        # count_scale[j]: the largest term of any subset of this size with j
        # clusters; gain[a, j] rescales a cluster of size a and a rest with j.
        n_points, size_max, best_zk = levels.n_points, levels.size_max, self.best_zk
        count_scale = np.full(n_points + 2, -np.inf)
        gain = np.zeros((n_points + 1, n_points + 1))
        for clusters in range(2, size + 1):
            cluster_sizes = np.arange(1, size - clusters + 2)
            count_scale[clusters] = np.max(
                size_max[cluster_sizes] + best_zk[size - cluster_sizes, clusters - 1]
            )
        for cluster_size in range(1, size):
            rest_counts = np.arange(1, size - cluster_size + 1)
            gain[cluster_size, rest_counts] = _exp_shifted(
                size_max[cluster_size] + best_zk[size - cluster_size, rest_counts],
                count_scale[rest_counts + 1],
            )
        # The inner loop runs over the rest's numbers of clusters.
        work = len(parents) * size << (size - 1)
        threads = threads_for(work, self.n_threads)
        blocks = self.blocks
        if blocks is not None and size < n_points:
            for high_parts, low_sizes in blocks.inside_calls(size, progress):
                kernels.count_level_blocked(
                    blocks.bits, high_parts, low_sizes, blocks.low_order, blocks.low_start,
                    size, levels.log_e, levels.cluster_scale, gain, count_scale,
                    self.offsets, self.log_zk, self.scaled_zk, self.block_work, threads,
                )
                progress.update(blocks.n_subsets(low_sizes, without_lowest=True) << (size - 1))
            # Subsets with no low bit (and so without point 0): plain kernel.
            parents = blocks.high_only_parents(size)
        # A pair costs one term per number of clusters of the rest.
        seconds_per_pair = SECONDS_PER_TERM["flat count"] * size
        for block in progress.calls(parents, 1 << (size - 1), seconds_per_pair):
            kernels.count_level(
                block, levels.log_e, levels.cluster_scale, gain,
                count_scale, self.offsets, self.log_zk, self.scaled_zk,
                self.binomial, self.work, self.spread, threads,
            )
            progress.update(len(block) << (size - 1))

    def finish(self, size, parents):
        """Scale the finished level for the levels above it."""
        block = self.log_zk[self.rows(size)].reshape(-1, size)
        self.best_zk[size, 1 : size + 1] = block.max(axis=0)
        self.scaled_zk[self.rows(size)] = _exp_shifted(
            block, self.best_zk[size, 1 : size + 1]
        ).ravel()

    def row(self, table, subset):
        """Entries j = 1..|subset| of a count table."""
        return table[self.offsets[subset] : self.offsets[subset] + self.levels.sizes[subset]]


class _ConstrainedMapPass:
    """M(S, j) = log MAP over partitions of S into j clusters, for j = 1..k only.

    Filled for the subsets without point 0 and the full set (see `_reached`);
    the other rows stay -inf and are never read.
    """

    def __init__(self, levels, n_threads, depth):
        self.levels, self.n_threads = levels, n_threads
        self.log_mapk = np.full((1 << levels.n_points, depth), -np.inf)
        n_points = levels.n_points
        self.blocks = (
            RowBlocks(n_points, min(BLOCK_BITS, n_points - 1), SECONDS_PER_TERM["flat count"])
            if n_points >= BLOCKED_MIN_POINTS else None
        )

    def level(self, size, parents, progress):
        n_points = self.levels.n_points
        parents = _reached(size, parents, n_points)
        if size == 1:
            self.log_mapk[parents, 0] = self.levels.log_e[parents]
            return
        n_pairs = (1 << (size - 1)) * self.log_mapk.shape[1]
        threads = threads_for(len(parents) * n_pairs, self.n_threads)
        blocks = self.blocks
        if blocks is not None and size < n_points:
            for high_parts, low_sizes in blocks.inside_calls(size, progress):
                kernels.constrained_map_level_blocked(
                    blocks.bits, high_parts, low_sizes, blocks.low_order, blocks.low_start,
                    self.levels.log_e, self.log_mapk, threads,
                )
                progress.update(blocks.n_subsets(low_sizes, without_lowest=True) << (size - 1))
            # Parents with no low bit (and so without point 0): plain kernel.
            parents = blocks.high_only_parents(size)
        # A pair costs one term per number of clusters kept.
        seconds_per_pair = SECONDS_PER_TERM["flat count"] * self.log_mapk.shape[1]
        for block in progress.calls(parents, 1 << (size - 1), seconds_per_pair):
            kernels.constrained_map_level(block, self.levels.log_e, self.log_mapk, threads)
            progress.update(len(block) << (size - 1))

    def finish(self, size, parents):
        """Nothing to rescale: the max table is kept in log space."""


def _run_levels(log_e, passes, name, n_threads, verbose, owner, seconds_per_term,
                reached_only=False):
    """Run each pass over the subsets of every size, reporting progress.

    `reached_only`: the passes visit only the subsets of `_reached`, and
    the progress counts only their pairs.
    """
    levels = _Levels(log_e)
    built = [make(levels) for make in passes]
    n_points = levels.n_points
    sizes = range(1, n_points + 1)

    def n_level_terms(size):
        # A subset of `size` points meets 2**(size - 1) clusters (those with its lowest point).
        parents = levels.level(size)
        if reached_only:
            parents = _reached(size, parents, n_points)
        return len(parents) << (size - 1)

    n_terms = sum(n_level_terms(size) for size in sizes)
    n_bytes = flat_trellis_bytes(n_points) + log_e.nbytes
    with LevelProgress(
        owner, name, n_points, n_terms, "pair", seconds_per_term, n_threads, n_bytes, verbose,
    ) as progress:
        for size in sizes:
            progress.level(size)
            parents = levels.level(size)
            # Each kernel call counts its pairs, so that its rate sizes the
            # next (``LevelProgress.calls``).
            done = progress.done
            for one_pass in built:
                one_pass.level(size, parents, progress)
                one_pass.finish(size, parents)
            # The pairs of a level without kernel calls (the points, a level
            # of no feasible subset).
            unreported = n_level_terms(size) - (progress.done - done)
            if unreported > 0:
                progress.update(unreported, kernel_call=False)
    return built


class _MapPass:
    """log MAP of the subsets without point 0 and of the full set (see `_reached`).

    The max half of the plain inside pass alone, which is all the MAP
    partition needs: the same values (`kernels.map_level`) on a third of
    the (subset, cluster) pairs, with no sums. Row 0 (the empty rest) is
    log MAP = 0; the rows of other subsets with point 0 are never read.
    """

    def __init__(self, levels, n_threads):
        self.levels, self.n_threads = levels, n_threads
        self.log_map = np.zeros(1 << levels.n_points)
        n_points = levels.n_points
        self.blocks = (
            RowBlocks(n_points, min(BLOCK_BITS, n_points - 1), SECONDS_PER_TERM["flat map"])
            if n_points >= BLOCKED_MIN_POINTS else None
        )

    def level(self, size, parents, progress):
        n_points = self.levels.n_points
        parents = _reached(size, parents, n_points)
        if size == 1:
            self.log_map[parents] = self.levels.log_e[parents]
            return
        n_pairs = 1 << (size - 1)
        threads = threads_for(len(parents) * n_pairs, self.n_threads)
        blocks = self.blocks
        if blocks is not None and size < n_points:
            for high_parts, low_sizes in blocks.inside_calls(size, progress):
                kernels.map_level_blocked(
                    blocks.bits, high_parts, low_sizes, blocks.low_order, blocks.low_start,
                    self.levels.log_e, self.log_map, threads,
                )
                progress.update(blocks.n_subsets(low_sizes, without_lowest=True) << (size - 1))
            # Parents with no low bit (and so without point 0): plain kernel.
            parents = blocks.high_only_parents(size)
        for block in progress.calls(parents, n_pairs, SECONDS_PER_TERM["flat map"]):
            kernels.map_level(block, self.levels.log_e, self.log_map, threads)
            progress.update(len(block) * n_pairs)

    def finish(self, size, parents):
        """Nothing to rescale: the max table is kept in log space."""


def map_partition(log_e, n_threads=1, verbose=0, owner="trellis"):
    """The MAP partition of a cluster potential table, without the rest of the trellis.

    The same partition and log potential as ``FlatTrellis(log_e).map_labels``
    and ``.map_log_potential`` (the same sums; ties go to the same partition),
    from a max-only pass over the subsets the full set's recursion reads:
    about a third of the plain pass's pairs, each cheaper.

    Parameters
    ----------
    log_e : ndarray of shape (2**N,)
        log E(C) of every cluster mask C (entry 0 unused); finite or -inf.
    n_threads : int
    verbose : int
        Progress of the pass (see ``levels.LevelProgress``).
    owner : str
        Name used in progress messages.

    Returns
    -------
    labels : ndarray of shape (N,) or None
        Cluster of every point, numbered in order of first point; None when
        every partition has zero potential.
    map_log_potential : float
    """
    log_e = np.ascontiguousarray(log_e, dtype=np.float64)
    (map_pass,) = _run_levels(
        log_e, [lambda levels: _MapPass(levels, n_threads)], "pass for the MAP partition",
        n_threads, verbose, owner, SECONDS_PER_TERM["flat map"], reached_only=True,
    )
    n_points = len(log_e).bit_length() - 1
    subset = (1 << n_points) - 1
    map_log_potential = float(map_pass.log_map[subset])
    if not map_log_potential > -np.inf:
        return None, map_log_potential
    labels = np.empty(n_points, dtype=np.int64)
    label = 0
    while subset:
        cluster = int(kernels.map_cluster(log_e, map_pass.log_map, subset))
        labels[[i for i in range(n_points) if cluster >> i & 1]] = label
        subset ^= cluster
        label += 1
    return labels, map_log_potential


class FlatTrellis:
    """Inside tables of a cluster potential table, and the queries they answer.

    Parameters
    ----------
    log_e : ndarray of shape (2**N,)
        log E(C) of every cluster mask C (entry 0 unused); finite or -inf.
    n_threads : int
    verbose : int
        Progress of the passes (see ``levels.LevelProgress``).
    owner : str
        Name used in progress messages.
    n_clusters : int or None
        Also find the MAP partition with exactly this many clusters.

    With `n_clusters` = k the constructor also finds the MAP partition into
    exactly k clusters, by a max-only pass whose count dimension is k deep.
    The pass with the full count dimension (log Z per number of clusters,
    N deep) runs on first use of `log_partition_by_count`. Both visit only
    the subsets without point 0 and the full set, a third of the (subset,
    cluster) pairs (see `_reached`).
    """

    def __init__(self, log_e, n_threads=1, verbose=0, owner="trellis", n_clusters=None):
        self.log_e = np.ascontiguousarray(log_e, dtype=np.float64)
        self.n_points = len(self.log_e).bit_length() - 1
        self.n_threads = n_threads
        self.verbose = verbose
        self.owner = owner
        self.n_clusters = n_clusters
        self._log_partition_by_count = None
        self._run_inside()
        if n_clusters is not None:
            self._run_constrained()

    def __setstate__(self, state):
        # What the kernels read, checked (a model file may be crafted).
        log_e = state.get("log_e")
        n_points = len(log_e).bit_length() - 1 if isinstance(log_e, np.ndarray) else None
        check_restored_tables("FlatTrellis", state, n_points, {
            "log_e": (np.float64, (), False), "log_z": (np.float64, (), False)})
        n_clusters = state.get("n_clusters")
        if n_clusters is not None and not (isinstance(n_clusters, int)
                                           and 1 <= n_clusters <= n_points):
            raise ValueError(f"a pickled FlatTrellis has n_clusters={n_clusters!r}")
        self.__dict__.update(state, n_points=n_points)

    @property
    def full(self):
        return (1 << self.n_points) - 1

    def _levels(self, passes, name, seconds_per_term=SECONDS_PER_TERM["flat"]):
        return _run_levels(self.log_e, passes, name, self.n_threads, self.verbose, self.owner,
                           seconds_per_term)

    def _run_inside(self):
        (inside,) = self._levels(
            [lambda levels: _InsidePass(levels, self.n_threads)], "inside pass (MAP, log Z)"
        )
        full = self.full
        self.log_z = inside.log_z
        self.log_partition = float(inside.log_z[full])
        self.map_log_potential = float(inside.log_map[full])
        # Without a feasible partition the MAP table holds no clusters.
        self.map_labels = (
            self._labels_from_table(inside.best) if self.log_partition > -np.inf else None
        )
        self.n_partitions = (
            bell_number(self.n_points) if inside.counts is None
            else count_as_int(inside.counts, full)
        )

    def _run_count(self):
        """log Z over the partitions into k clusters, for every k."""
        (counting,) = self._levels(
            [lambda levels: _CountPass(levels, self.n_threads)],
            "pass counting clusters (log Z per number of clusters)",
            SECONDS_PER_TERM["flat count"],
        )
        self._log_partition_by_count = np.concatenate(
            [[-np.inf], counting.row(counting.log_zk, self.full)]
        )

    def _run_constrained(self):
        """The MAP partition into exactly n_clusters clusters (a max table k deep)."""
        k = self.n_clusters
        (constrained,) = self._levels(
            [lambda levels: _ConstrainedMapPass(levels, self.n_threads, k)],
            f"pass for the MAP with {k} clusters", SECONDS_PER_TERM["flat count"],
        )
        self.constrained_map_log_potential = float(constrained.log_mapk[self.full, k - 1])
        self.constrained_map_labels = (
            self._constrained_labels(constrained.log_mapk, k)
            if self.constrained_map_log_potential > -np.inf else None
        )

    @property
    def log_partition_by_count(self):
        """log Z over the partitions into k clusters, k = 0..N (computed once)."""
        if self._log_partition_by_count is None:
            self._run_count()
        return self._log_partition_by_count

    def _labels_from_table(self, best):
        labels = np.empty(self.n_points, dtype=np.int64)
        subset, label = self.full, 0
        while subset:
            cluster = int(best[subset])
            labels[[i for i in range(self.n_points) if cluster >> i & 1]] = label
            subset ^= cluster
            label += 1
        return labels

    def _constrained_labels(self, log_mapk, n_clusters):
        labels = np.empty(self.n_points, dtype=np.int64)
        subset = self.full
        for label in range(n_clusters):
            remaining = n_clusters - label
            cluster = subset if remaining == 1 else int(kernels.constrained_map_cluster(
                self.log_e, log_mapk, subset, remaining
            ))
            labels[[i for i in range(self.n_points) if cluster >> i & 1]] = label
            subset ^= cluster
        return labels

    def cluster_log_marginals(self):
        """log P(C is a cluster of the partition) for every mask C; entry 0 is -inf.

        P(C) = E(C) Z(complement of C) / Z(all points): the partitions holding
        C are C plus any partition of the other points.
        """
        masks = np.arange(1 << self.n_points)
        with np.errstate(invalid="ignore"):
            marginals = self.log_e + self.log_z[self.full ^ masks] - self.log_partition
        marginals[np.isnan(marginals)] = -np.inf
        marginals[0] = -np.inf
        return np.minimum(marginals, 0.0)

    def cluster_log_marginal(self, members):
        """log P(the points ``members`` form a cluster of the partition), O(1)."""
        mask = members_mask(members)
        with np.errstate(invalid="ignore"):
            value = self.log_e[mask] + self.log_z[self.full ^ mask] - self.log_partition
        return float(value) if value == value else -np.inf

    def together_log_probability(self, members):
        """log P(the points ``members`` lie in one cluster), over the clusters that hold them.

        The sum of P(C) = E(C) Z(complement of C) / Z over the 2**(N - k)
        supersets C of the k members, in log space.
        """
        mask = members_mask(members)
        clusters = mask | submasks(self.full ^ mask, self.n_points)
        with np.errstate(invalid="ignore"):
            values = self.log_e[clusters] + self.log_z[self.full ^ clusters]
        values[np.isnan(values)] = -np.inf
        # Rounding in log Z must not make a probability exceed one.
        return float(min(logsumexp(values) - self.log_partition, 0.0))

    def most_probable_clusters(self, n_top, min_size):
        """Members and log marginals of the n_top most probable clusters."""
        order, level_start = subsets_by_size(self.n_points)
        return most_probable_masks(
            self.cluster_log_marginals(), order, level_start, n_top, min_size, self.n_points
        )

    def pairwise_probability(self):
        """(N, N) matrix of P(i and j are in the same cluster)."""
        table = np.exp(self.cluster_log_marginals())
        # One parallel loop of 2**(N-1) additions per point.
        threads = threads_for(len(table) // 2, self.n_threads)
        return np.minimum(kernels.pairwise_from_marginals(table, self.n_points, threads), 1.0)

    def sample_labels(self, n_samples, random_state):
        """(n_samples, N) labels of partitions drawn exactly from P(partition)."""
        uniforms = random_state.random((n_samples, self.n_points))
        cache = np.empty(max(1 << self.n_points, _SAMPLE_CACHE_DOUBLES))
        return kernels.sample_partitions(self.log_e, self.log_z, uniforms, cache)

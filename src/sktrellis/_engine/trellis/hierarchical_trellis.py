"""The full hierarchical trellis: DP tables over all 2**N subsets and their queries.

Drives the kernels of ``_hierarchical.pyx`` level by level (subsets of one
size at a time), for the inside pass and the outside pass alike, so Ctrl-C
is honoured between chunks of a level and ``verbose`` shows a progress bar.
"""
import math

import numpy as np

from .._subsets import canonical_lefts, count_as_int, subsets_by_size
from ..potential._split_potential import SplitPotential
from ..tables import check_restored_tables, subset_sums
from ..tree.conversion import linkage_from_splits, splits_from_merges, splits_from_table
from . import _hierarchical as kernels
from .levels import (
    SECONDS_PER_TERM, LevelProgress, RowBlocks, level_terms, threads_for,
)
from .cluster_queries import members_mask, most_probable_masks

# The sampler caches the cumulative split weights of the subsets it meets
# twice, in a buffer of at least this many doubles (128 MiB; one per subset
# from N = 24). Broad posteriors need it: 10**5 samples at N = 18 took 34 s
# with one double per subset, 3.0 s with 2**24 (measured). np.empty only
# commits the pages the sampler writes, but the estimate counts them all.
_SAMPLE_CACHE_MIN_DOUBLES = 1 << 24

#: Bytes per subset of the trellis tables kept from fit to the last query:
#: subsets by size (4), log Z (8), log MAP (8), MAP split (4); the generic
#: kinds add 128-bit tree counts (16).
_TABLE_BYTES = {"separable": 24, "function": 40, "table": 40}
#: Bytes per subset of the inside pass's temporaries: the 16-byte
#: (factor, MAP) records of both children (separable kind); the 32-byte
#: records of the Ginkgo kernel (function kind: counted for every function
#: potential, 8 bytes per subset more than the others need at their peak).
_INSIDE_BYTES = {"separable": 32, "function": 32, "table": 0}
#: Bytes per subset after fit: the cached cluster log marginals (8), plus the
#: largest of the outside pass's parent and sibling factors (16; the 32-byte
#: records of the Ginkgo kernel, function kind), the temporaries of
#: most_probable_clusters (16) and the sampler's cache index and cache (16).
_QUERY_BYTES = {"separable": 24, "function": 40, "table": 24}


#: Low bits of a subset that index within a row of the cache-blocked passes:
#: a row pair of the inside pass is 2 x 2**11 16-byte records (64 KiB), which
#: stays in L2 while it serves C(11, j) parents. 9 to 12 bits measured within
#: 10% of each other at N=20; 11 was the fastest.
BLOCK_BITS = 11
#: Low bits of the Ginkgo outside pass's rows: a row pair is 2 x 2**12 32-byte
#: records and 2 x 2**12 16-byte counts (384 KiB, within a 1 MiB L2); 12
#: bits measured 8 % faster than 11 and as fast as 13 (N = 19, one thread,
#: when the inside pass shared them).
GINKGO_BLOCK_BITS = 12
#: Low bits of the Ginkgo inside pass's rows: a row pair is 2 x 2**14 32-byte
#: records (1 MiB), the tree counts inside them. Its runs of splits are
#: longer than with 12 bits (a call per parent and row pair costs about what
#: a block of splits does): 10 % faster at N = 19 and 21 (one thread, 13 and
#: 15 bits within noise of 14, 12 and 11 slower).
GINKGO_INSIDE_BLOCK_BITS = 14
#: The separable passes are cache-blocked from this many points on. Measured
#: (one thread, CPU time): the blocked inside pass 1.25x faster at
#: N=16, 1.5x at N=17, 2x at N=18; the outside pass equal up to N=17, faster
#: from N=18 on.
BLOCKED_MIN_POINTS = 16


def hierarchical_trellis_bytes(kind, n_points, table_bytes_per_subset=0):
    """Peak memory of an exact hierarchical fit and all its queries, in bytes.

    Counts the potential's tables of `kind` ("separable", "function" or
    "table", see ``SplitPotential.table_bytes``; a function potential has
    `table_bytes_per_subset`), the trellis tables, and
    the largest of the temporaries of the inside pass, the outside pass, the
    cluster queries and the sampler; nothing depends on the thread count.
    The samples themselves (8 (N - 1) bytes per tree) are not included.

    Parameters
    ----------
    kind : str
    n_points : int
    table_bytes_per_subset : int, default=0

    Returns
    -------
    n_bytes : int
    """
    per_subset = _TABLE_BYTES[kind] + max(_INSIDE_BYTES[kind], _QUERY_BYTES[kind])
    return (
        SplitPotential.table_bytes(kind, n_points, table_bytes_per_subset)
        + per_subset * (1 << n_points)
        + 8 * _SAMPLE_CACHE_MIN_DOUBLES
    )


def _inside_splits(size):
    """Splits of a subset of `size` points into two non-empty children."""
    return (1 << (size - 1)) - 1


def inside_pass_seconds(rate, n_points, n_threads):
    """Estimated wall time of the inside pass over n_points (see SECONDS_PER_TERM).

    Parameters
    ----------
    rate : {"separable", "generic", "ginkgo"}
        The kind of potential, a key of ``SECONDS_PER_TERM``: separable,
        evaluated per split through a function or table, or the Ginkgo
        likelihood (which runs kernels of its own).
    n_points : int
    n_threads : int

    Returns
    -------
    seconds : float
        A quiet-machine estimate: a loaded or slower machine takes longer.
    """
    terms = level_terms(n_points, range(1, n_points + 1), _inside_splits)
    return terms * SECONDS_PER_TERM[rate] / max(1, n_threads)


def _seconds_per_split(separable):
    """One thread's time per split of a pass, separable or not (see SECONDS_PER_TERM)."""
    return SECONDS_PER_TERM["separable" if separable else "generic"]


def infeasible_error(n_points, energy):
    """The ValueError for a set no tree of non-zero potential spans."""
    return ValueError(
        f"every tree of these n_samples={n_points} points has zero potential "
        f"under {energy!r}: no split of the full set is feasible"
    )


def double_factorial_trees(n_points):
    """(2N - 3)!!, the number of rooted binary trees with N labelled leaves."""
    return math.prod(range(1, 2 * n_points - 2, 2)) if n_points > 1 else 1


class HierarchicalTrellis:
    """Inside tables (log Z, log MAP, MAP split, tree counts) of a SplitPotential.

    The outside pass (cluster marginals) runs on first demand.

    Parameters
    ----------
    potential : SplitPotential
    n_threads : int
    verbose : int
        Progress of the passes (see ``levels.LevelProgress``).
    owner : str
        Name used in progress messages.
    deadline : float, default=None
        A ``time.perf_counter()`` value past which the inside pass stops
        with ``levels.DeadlinePassed`` (within one kernel call); None: none.
    """

    #: Whether the Ginkgo potential runs in its own kernels (``inside_level_ginkgo``,
    #: ``outside_level_ginkgo`` and their blocked forms; the sampler's inline
    #: formula) rather than through its C function; False only to compare the two.
    use_ginkgo_kernel = True

    def __init__(self, potential, n_threads=1, verbose=0, owner="trellis", deadline=None):
        self.potential = potential
        self.n_points = potential.n_points
        self.n_threads = n_threads
        self.verbose = verbose
        self.owner = owner
        self.deadline = deadline
        self._log_marginals = None
        self._run()

    def __setstate__(self, state):
        # What the kernels read, checked (a model file may be crafted); the
        # subset order is rebuilt, never read from the file.
        potential = state.get("potential")
        if not isinstance(potential, SplitPotential):
            raise TypeError(f"a pickled HierarchicalTrellis has potential={potential!r}")
        n_points = potential.n_points
        check_restored_tables("HierarchicalTrellis", state, n_points, {
            "log_z": (np.float64, (), False), "log_map": (np.float64, (), False),
            "best_left": (np.uint32, (), False), "_log_marginals": (np.float64, (), True),
            "counts": (np.uint64, (2,), True)})
        masks = np.arange(1 << n_points, dtype=np.uint32)
        left = state["best_left"]
        proper = (left & ~masks) == 0
        proper[2:] &= (left[2:] != 0) & (left[2:] != masks[2:])
        singletons = (masks & (masks - 1)) == 0
        if not np.all(proper | singletons):
            raise ValueError("a pickled HierarchicalTrellis has MAP splits that are not "
                             "splits: the file is damaged or was not written by sktrellis")
        state = dict(state, n_points=n_points)
        state["order"], state["level_start"] = subsets_by_size(n_points)
        self.__dict__.update(state)

    def _run(self):
        n_points, n_subsets = self.n_points, 1 << self.n_points
        self.order, self.level_start = subsets_by_size(n_points)
        self.log_z = np.zeros(n_subsets)
        self.log_map = np.zeros(n_subsets)
        self.best_left = np.zeros(n_subsets, dtype=np.uint32)
        # Exact counts of finite-potential trees are only needed when some
        # split can be -inf; separable potentials from finite tables never are.
        separable = self.potential.is_separable
        self.counts = None if separable else np.zeros((n_subsets, 2), dtype=np.uint64)
        if self.counts is not None:
            self.counts[1 << np.arange(n_points), 0] = 1
        rows = n_subsets if separable else 1
        left_factors, right_factors = np.zeros((rows, 2)), np.zeros((rows, 2))
        ginkgo = self._uses_ginkgo_kernel()
        rate = SECONDS_PER_TERM["ginkgo"] if ginkgo else _seconds_per_split(separable)
        blocked = (separable or ginkgo) and n_points >= BLOCKED_MIN_POINTS
        if blocked:
            bits = GINKGO_INSIDE_BLOCK_BITS if ginkgo else BLOCK_BITS
            blocks = RowBlocks(n_points, min(bits, n_points), rate)
            # The empty right child of the row pair (S_hi, empty): no term.
            right_factors[0] = (0.0, -np.inf)
        if ginkgo:
            records = kernels.ginkgo_split_records(self.potential)
            # The largest log Z of each level, the scales of the records.
            level_max = np.full(n_points + 1, -np.inf)
            kernels.fill_ginkgo_records(self.order[self.level_start[1] : self.level_start[2]],
                                        self.log_z, self.log_map, self.counts, records,
                                        level_max, 1)
        with self._progress("inside pass (MAP tree, log Z)", _inside_splits,
                            self.deadline) as progress:
            for size in range(2, n_points + 1):
                progress.level(size)
                parents = self.order[self.level_start[size] : self.level_start[size + 1]]
                n_splits = _inside_splits(size)
                n_threads = threads_for(len(parents) * n_splits, self.n_threads)
                scale = 0.0
                if separable:
                    scale = kernels.prepare_separable_level(
                        self.potential, size, self.order, self.level_start,
                        self.log_z, self.log_map, left_factors, right_factors, n_threads,
                    )
                if blocked:
                    for high_parts, low_sizes in blocks.inside_calls(size, progress):
                        if ginkgo:
                            kernels.inside_level_ginkgo_blocked(
                                self.potential, blocks.bits, high_parts, low_sizes,
                                blocks.low_order, blocks.low_start, self.log_z, self.log_map,
                                self.best_left, self.counts, records, level_max, n_threads,
                            )
                        else:
                            kernels.inside_level_blocked(
                                self.potential, blocks.bits, high_parts, low_sizes,
                                blocks.low_order, blocks.low_start, self.log_z, self.log_map,
                                self.best_left, scale, left_factors, right_factors, n_threads,
                            )
                        progress.update(blocks.n_subsets(low_sizes) * n_splits)
                    # Parents with no low bit, C(N - bits, size) of them: plain kernel.
                    parents = blocks.high_only_parents(size)
                for block in progress.calls(parents, n_splits, rate):
                    if ginkgo:
                        kernels.inside_level_ginkgo(
                            self.potential, block, self.log_z, self.log_map, self.best_left,
                            self.counts, records, level_max, n_threads,
                        )
                    else:
                        kernels.inside_level(
                            self.potential, block,
                            self.log_z, self.log_map, self.best_left, self.counts, scale,
                            left_factors, right_factors, n_threads,
                        )
                    progress.update(len(block) * n_splits)
                if ginkgo and size < n_points:
                    level = self.order[self.level_start[size] : self.level_start[size + 1]]
                    kernels.fill_ginkgo_records(level, self.log_z, self.log_map, self.counts,
                                                records, level_max, n_threads)

    def check_feasible(self, energy):
        """Raise ValueError unless log Z is finite or -inf only where allowed.

        The kernels mark a subset with a NaN split NaN and let +inf through;
        the subset tables show either in O(2**N) instead of a -inf log Z.
        A log Z of -inf for the full set means no tree has non-zero potential.

        Parameters
        ----------
        energy : HierarchicalEnergy
            The energy behind the potential, named in the messages.
        """
        n_points = self.n_points
        invalid = np.flatnonzero(~(self.log_z < np.inf))
        if invalid.size:
            subset = int(invalid[0])
            raise ValueError(
                f"the split potential of {energy!r} is NaN or +inf for some split of the "
                f"points {np.flatnonzero(subset >> np.arange(n_points) & 1).tolist()} "
                f"(n_samples={n_points}; their log Z is {self.log_z[subset]}): a split's "
                "log psi must be finite, or -inf for a forbidden split; find it with "
                "potential.evaluate(parents, lefts)"
            )
        if not self.log_partition > -np.inf:
            raise infeasible_error(n_points, energy)

    def _uses_ginkgo_kernel(self):
        """Whether the passes run the Ginkgo kernels (``inside_level_ginkgo``...)."""
        return self.use_ginkgo_kernel and kernels.ginkgo_kernel_applies(self.potential)

    def _progress(self, stage, terms_per_subset, deadline=None):
        """The LevelProgress of a pass over every level, `terms_per_subset(size)` terms each."""
        n_points = self.n_points
        kind = "separable" if self.potential.is_separable else "function"
        n_bytes = self.potential.nbytes + ((_TABLE_BYTES[kind] + _INSIDE_BYTES[kind]) << n_points)
        per_subset = _TABLE_BYTES[kind] + max(_INSIDE_BYTES[kind], _QUERY_BYTES[kind])
        peak_bytes = (
            self.potential.nbytes + (per_subset << n_points) + 8 * _SAMPLE_CACHE_MIN_DOUBLES
        )
        return LevelProgress(
            self.owner, stage, n_points,
            level_terms(n_points, range(1, n_points + 1), terms_per_subset), "split",
            SECONDS_PER_TERM["ginkgo"] if self._uses_ginkgo_kernel()
            else _seconds_per_split(kind == "separable"),
            self.n_threads, n_bytes, self.verbose, peak_bytes, deadline,
        )

    @property
    def full(self):
        return (1 << self.n_points) - 1

    @property
    def log_partition(self):
        return float(self.log_z[self.full])

    @property
    def map_log_potential(self):
        return float(self.log_map[self.full])

    @property
    def n_trees(self):
        """Number of trees with non-zero potential, exact."""
        if self.counts is None:
            return double_factorial_trees(self.n_points)
        return count_as_int(self.counts, self.full)

    def map_splits(self):
        """Preorder (parents, lefts) of the MAP tree."""
        return splits_from_table(self.best_left, self.n_points)

    def _outside(self):
        """log O(C) of every subset: the outside pass, largest clusters first."""
        n_points, n_subsets = self.n_points, 1 << self.n_points
        potential, order, level_start = self.potential, self.order, self.level_start
        log_out = np.full(n_subsets, -np.inf)
        log_out[self.full] = 0.0
        separable = potential.is_separable
        rows = n_subsets if separable else 1
        parent_factor, sibling_factor = np.zeros(rows), np.zeros(rows)
        parent_scale = np.full(n_points + 1, -np.inf)
        sibling_scale = np.full(n_points + 1, -np.inf)
        ginkgo = self._uses_ginkgo_kernel()
        rate = SECONDS_PER_TERM["ginkgo"] if ginkgo else _seconds_per_split(separable)
        blocked = (separable or ginkgo) and n_points >= BLOCKED_MIN_POINTS
        if blocked:
            bits = GINKGO_BLOCK_BITS if ginkgo else BLOCK_BITS
            blocks = RowBlocks(n_points, min(bits, n_points), rate)
            scratch = blocks.outside_scratch(self.n_threads) if separable else None
        if separable:
            parent_scale[n_points] = kernels.outside_parent_factors(
                potential, order[level_start[n_points] :], log_out, parent_factor, 1
            )
        if ginkgo:
            records = kernels.ginkgo_records(potential, self.log_z, -np.inf)
            kernels.fill_ginkgo_outside_records(potential, order[level_start[n_points] :],
                                                log_out, records, 1)
        def outside_terms(size):
            return (1 << (n_points - size)) - 1 if size < n_points else 0

        with self._progress("outside pass (cluster marginals)", outside_terms) as progress:
            for size in range(n_points - 1, 0, -1):
                progress.level(size)
                clusters = order[level_start[size] : level_start[size + 1]]
                n_terms = outside_terms(size)
                n_threads = threads_for(len(clusters) * n_terms, self.n_threads)
                if separable:
                    kernels.outside_sibling_factors(
                        potential, size, order, level_start, self.log_z,
                        sibling_factor, sibling_scale, n_threads,
                    )
                if blocked:
                    for high_parts, low_sizes in blocks.outside_calls(size, progress):
                        if ginkgo:
                            kernels.outside_level_ginkgo_blocked(
                                potential, blocks.bits, high_parts, low_sizes,
                                blocks.low_order, blocks.low_start, self.log_z, log_out,
                                records, n_threads,
                            )
                        else:
                            kernels.outside_level_blocked(
                                potential, blocks.bits, size, high_parts, low_sizes,
                                blocks.low_order, blocks.low_start, self.log_z, log_out,
                                parent_factor, parent_scale, sibling_factor, sibling_scale,
                                scratch, n_threads,
                            )
                        progress.update(blocks.n_subsets(low_sizes) * n_terms)
                else:
                    for block in progress.calls(clusters, n_terms, rate):
                        if ginkgo:
                            kernels.outside_level_ginkgo(
                                potential, block, self.log_z, log_out, records, n_threads)
                        else:
                            kernels.outside_level(
                                potential, block, self.log_z, log_out,
                                parent_factor, parent_scale, sibling_factor, sibling_scale,
                                n_threads,
                            )
                        progress.update(len(block) * n_terms)
                if ginkgo and size > 1:
                    kernels.fill_ginkgo_outside_records(potential, clusters, log_out, records,
                                                        n_threads)
                if separable and size > 1:
                    parent_scale[size] = kernels.outside_parent_factors(
                        potential, clusters, log_out, parent_factor, n_threads
                    )
        return log_out

    def cluster_log_marginals(self):
        """log P(C is a cluster of the tree) for every subset C (cached, read-only)."""
        if self._log_marginals is None:
            # In place: the outside sums become the marginals Z(C) O(C) / Z.
            marginals = self._outside()
            with np.errstate(invalid="ignore"):
                marginals += self.log_z
                marginals -= self.log_partition
            # An impossible cluster has O(C) = 0 (-inf), never NaN: Z(C) is finite.
            np.minimum(marginals, 0.0, out=marginals)
            marginals.flags.writeable = False
            self._log_marginals = marginals
        return self._log_marginals

    def cluster_sums(self, values):
        """Sums of per-point ``values`` over every subset (posterior interface)."""
        return subset_sums(values)

    def split_blocks(self, max_splits=1 << 20):
        """(parents, lefts, rights, log P(parent is a node split so)) in blocks.

        P(C, A) = P(C) psi(C; A, B) Z(A) Z(B) / Z(C); clusters of zero
        probability are skipped (their splits have zero probability).
        """
        log_marginals = self.cluster_log_marginals()
        for size in range(2, self.n_points + 1):
            parents = self.order[self.level_start[size] : self.level_start[size + 1]]
            parents = parents[log_marginals[parents] > -np.inf]
            n_splits = (1 << (size - 1)) - 1
            step = max(1, max_splits // n_splits)
            for first in range(0, len(parents), step):
                block = parents[first : first + step]
                lefts = canonical_lefts(block)
                rights = block[:, None] ^ lefts
                log_probability = self.potential.evaluate(
                    np.repeat(block, n_splits), lefts.ravel()
                ).reshape(lefts.shape)
                log_probability += self.log_z[lefts]
                log_probability += self.log_z[rights]
                log_probability += (log_marginals[block] - self.log_z[block])[:, None]
                yield np.repeat(block, n_splits), lefts.ravel(), rights.ravel(), log_probability.ravel()

    def cluster_log_marginal(self, members):
        """log P(the points ``members`` form a cluster of the tree)."""
        if len(members) in (1, self.n_points):
            return 0.0  # a leaf or the root: in every tree
        return float(self.cluster_log_marginals()[members_mask(members)])

    def subtree_log_probability(self, members, merges):
        """log P(``members`` is a cluster whose subtree is ``merges``) (posterior interface).

        O(S) phi(T_S) / Z = P(S is a cluster) phi(T_S) / Z(S): the marginal
        of the cluster times the probability of its subtree given it.
        """
        parents, lefts = splits_from_merges(merges, len(members), members)
        log_potential = float(self.potential.evaluate(parents, lefts).sum()) if len(merges) else 0.0
        if not log_potential > -np.inf:
            return -np.inf
        # Z(S) >= phi(T_S) > 0 here. Rounding must not make a probability exceed one.
        conditional = log_potential - self.log_z[members_mask(members)]
        return float(min(self.cluster_log_marginal(members) + conditional, 0.0))

    def most_probable_clusters(self, n_top, min_size):
        """Members and log marginals of the n_top most probable clusters but the root."""
        return most_probable_masks(
            self.cluster_log_marginals(), self.order, self.level_start, n_top, min_size,
            self.n_points - 1,
        )

    def sample_splits(self, n_samples, random_state):
        """(parents, lefts), each (n_samples, N - 1): trees drawn exactly from P(tree)."""
        uniforms = random_state.random((n_samples, self.n_points - 1))
        cache = np.empty(max(1 << self.n_points, _SAMPLE_CACHE_MIN_DOUBLES))
        return kernels.sample_splits(self.potential, self.log_z, uniforms, cache,
                                     self.use_ginkgo_kernel
                                     and kernels.is_ginkgo_potential(self.potential))

    def sample_linkages(self, n_samples, random_state):
        """Linkage matrices of n_samples trees drawn exactly from P(tree)."""
        parents, lefts = self.sample_splits(n_samples, random_state)
        return list(linkage_from_splits(self.potential, parents, lefts))

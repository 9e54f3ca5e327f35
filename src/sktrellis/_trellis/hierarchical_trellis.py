"""The full hierarchical trellis: DP tables over all 2**N subsets and their queries.

Drives the kernels of ``_hierarchical.pyx`` level by level (subsets of one
size at a time) so Ctrl-C is honoured between chunks of a level and
``verbose`` can report progress.
"""
import math
import time

import numpy as np

from .._tree import splits_from_table
from . import _hierarchical as kernels

# A kernel call handles at most about this many splits, so KeyboardInterrupt
# and progress messages come every fraction of a second.
_CHUNK_SPLITS = 1 << 28
# Doubles the sampler may keep in its cache of split distributions.
_SAMPLE_CACHE_DOUBLES = 1 << 27
# Below this many splits a kernel call runs on one thread: waking a team
# costs more than the work, badly so when the other cores are busy.
_PARALLEL_MIN_SPLITS = 1 << 16


def threads_for(n_splits, n_threads):
    """Threads worth using for a kernel call over n_splits splits."""
    return n_threads if n_splits >= _PARALLEL_MIN_SPLITS else 1


def trellis_bytes_per_subset(separable):
    """Peak bytes per subset of the trellis tables besides the energy's own.

    log Z and log MAP (8 + 8), MAP split (4), subsets by size (4), outside
    sums (8, on demand) and the sampler's cache index (8, on demand); plus
    the (factor, MAP) records of the separable path (16 + 16) or the 128-bit
    tree counts of the generic path (16).
    """
    return 40 + (32 if separable else 16)


def double_factorial_trees(n_points):
    """(2N - 3)!!, the number of rooted binary trees with N labelled leaves."""
    return math.prod(range(1, 2 * n_points - 2, 2)) if n_points > 1 else 1


class HierarchicalTrellis:
    """Inside tables (log Z, log MAP, MAP split, tree counts) of a SplitPotential.

    Parameters
    ----------
    potential : SplitPotential
    n_threads : int
    verbose : int
    owner : str
        Name used in progress messages.
    """

    def __init__(self, potential, n_threads=1, verbose=0, owner="trellis"):
        self.potential = potential
        self.n_points = potential.n_points
        self.n_threads = n_threads
        self.verbose = verbose
        self.owner = owner
        self._log_outside = None
        self._run()

    def _run(self):
        n_points, n_subsets = self.n_points, 1 << self.n_points
        self.order, self.level_start = kernels.subsets_by_size(n_points)
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
        start = time.perf_counter()
        for size in range(2, n_points + 1):
            parents = self.order[self.level_start[size] : self.level_start[size + 1]]
            n_splits = (1 << (size - 1)) - 1
            n_threads = threads_for(len(parents) * n_splits, self.n_threads)
            scale = 0.0
            if separable:
                scale = kernels.prepare_separable_level(
                    self.potential, size, self.order, self.level_start,
                    self.log_z, self.log_map, left_factors, right_factors, n_threads,
                )
            chunk = max(1, _CHUNK_SPLITS // n_splits)
            for first in range(0, len(parents), chunk):
                kernels.inside_level(
                    self.potential, parents[first : first + chunk],
                    self.log_z, self.log_map, self.best_left, self.counts, scale,
                    left_factors, right_factors, n_threads,
                )
            if self.verbose:
                print(
                    f"[{self.owner}] subsets of size {size}/{n_points}: "
                    f"{len(parents)} subsets x {n_splits} splits, "
                    f"{time.perf_counter() - start:.2f} s",
                    flush=True,
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
        return kernels.count_as_int(self.counts, self.full)

    def map_splits(self):
        """Preorder (parents, lefts) of the MAP tree."""
        return splits_from_table(self.best_left, self.n_points)

    def cluster_log_marginals(self):
        """log P(C is a cluster of the tree) for every subset C (cached)."""
        if self._log_outside is None:
            self._log_outside = kernels.outside(
                self.potential, self.order, self.level_start, self.log_z,
                threads_for(3**self.n_points // 2, self.n_threads),
            )
        with np.errstate(invalid="ignore"):
            marginals = self.log_z + self._log_outside - self.log_partition
        # -inf + -inf is fine; only an impossible cluster gives NaN-free -inf.
        marginals[np.isnan(marginals)] = -np.inf
        return np.minimum(marginals, 0.0)

    def sample_splits(self, n_samples, random_state):
        """Preorder splits of n_samples trees drawn exactly from P(tree)."""
        uniforms = random_state.random((n_samples, self.n_points - 1))
        return kernels.sample_splits(
            self.potential, self.log_z, uniforms, _SAMPLE_CACHE_DOUBLES
        )


###############################################################################
# Bayesian hierarchical clustering: the tree with the largest DPM lower bound

#: Bytes per subset of best_bhc_tree besides the cluster table: log q* (8),
#: best split (4) and subsets by size (4).
BEST_BHC_TREE_BYTES_PER_SUBSET = 16


def best_bhc_tree(log_cluster, n_threads=1, verbose=0, owner="trellis"):
    """The binary tree maximising Heller & Ghahramani's q(T) = d_T p(D | T).

    q(T) sums ``prod_C a(C)`` over the partitions consistent with T; with
    a(C) = alpha Gamma(|C|) p(D_C), ``q(T) Gamma(alpha) / Gamma(alpha + N)``
    is the lower bound on the Dirichlet process mixture evidence that the
    tree gives, so this is the tree with the tightest such bound. Exact over
    all (2N - 3)!! trees, in O(3**N) time (kernel ``best_bhc_level``).

    Parameters
    ----------
    log_cluster : ndarray of shape (2**N,)
        log a(C) of every subset (entry 0 unused).
    n_threads : int
    verbose : int
    owner : str
        Name used in progress messages.

    Returns
    -------
    log_best : float
        log q of the best tree.
    parents, lefts : ndarray of shape (N - 1,)
        Its splits in preorder (see :mod:`sktrellis._tree`).
    """
    log_cluster = np.ascontiguousarray(log_cluster, dtype=np.float64)
    n_points = len(log_cluster).bit_length() - 1
    order, level_start = kernels.subsets_by_size(n_points)
    log_best = log_cluster.copy()
    best_left = np.zeros(1 << n_points, dtype=np.uint32)
    start = time.perf_counter()
    for size in range(2, n_points + 1):
        parents = order[level_start[size] : level_start[size + 1]]
        n_splits = (1 << (size - 1)) - 1
        chunk = max(1, _CHUNK_SPLITS // n_splits)
        for first in range(0, len(parents), chunk):
            kernels.best_bhc_level(
                parents[first : first + chunk], log_cluster, log_best, best_left, n_threads
            )
        if verbose:
            print(
                f"[{owner}] subsets of size {size}/{n_points}: "
                f"{len(parents)} subsets x {n_splits} splits, "
                f"{time.perf_counter() - start:.2f} s",
                flush=True,
            )
    full = (1 << n_points) - 1
    return float(log_best[full]), *splits_from_table(best_left, n_points)

"""Best trees over all 2**N subsets from per-cluster scores (driver of ``_best_tree.pyx``).

Two users: exact Bayesian hierarchical clustering (the tree of largest
q(T)) and the maximum-clade-credibility tree of an exact posterior.
"""
import numpy as np

from ..tree.conversion import splits_from_table
from . import _best_tree as kernels
from .._subsets import subsets_by_size
from .levels import SECONDS_PER_TERM, LevelProgress, level_terms, threads_for

#: Bytes per subset of best_bhc_tree and max_clade_credibility_tree besides
#: the cluster table: the best value (8), best split (4) and subsets by size (4).
BEST_TREE_BYTES_PER_SUBSET = 16


def _best_tree(log_cluster, log_leaf, log_add_cluster, n_threads, verbose, owner):
    """The kernel's recursion over all levels; returns (value, parents, lefts)."""
    log_cluster = np.ascontiguousarray(log_cluster, dtype=np.float64)
    n_points = len(log_cluster).bit_length() - 1
    order, level_start = subsets_by_size(n_points)
    log_best = np.empty(1 << n_points)
    log_best[1 << np.arange(n_points)] = log_leaf[1 << np.arange(n_points)]
    best_left = np.zeros(1 << n_points, dtype=np.uint32)

    def splits(size):
        return (1 << (size - 1)) - 1

    n_bytes = log_cluster.nbytes + BEST_TREE_BYTES_PER_SUBSET * (1 << n_points)
    with LevelProgress(
        owner, "best tree", n_points, level_terms(n_points, range(2, n_points + 1), splits),
        "split", SECONDS_PER_TERM["separable"], n_threads, n_bytes, verbose,
    ) as progress:
        for size in range(2, n_points + 1):
            progress.level(size)
            parents = order[level_start[size] : level_start[size + 1]]
            n_splits = splits(size)
            threads = threads_for(len(parents) * n_splits, n_threads)
            for block in progress.calls(parents, n_splits, SECONDS_PER_TERM["separable"]):
                kernels.best_tree_level(
                    block, log_cluster, log_best, best_left, log_add_cluster, threads,
                )
                progress.update(len(block) * n_splits)
    full = (1 << n_points) - 1
    return float(log_best[full]), *splits_from_table(best_left, n_points)


def best_bhc_tree(log_cluster, n_threads=1, verbose=0, owner="trellis"):
    """The binary tree maximising Heller & Ghahramani's q(T) = d_T p(D | T).

    q(T) sums ``prod_C a(C)`` over the partitions consistent with T; with
    a(C) = alpha Gamma(|C|) p(D_C), ``q(T) Gamma(alpha) / Gamma(alpha + N)``
    is the lower bound on the Dirichlet process mixture evidence that the
    tree gives, so this is the tree with the tightest such bound. Exact over
    all (2N - 3)!! trees, in O(3**N) time.

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
        Its splits in preorder (see :mod:`sktrellis._engine.tree.conversion`).
    """
    return _best_tree(log_cluster, log_cluster, True, n_threads, verbose, owner)


def max_clade_credibility_tree(log_marginals, n_threads=1, verbose=0, owner="trellis"):
    """The tree whose clusters have the largest product of posterior marginals.

    best(S) = log P(S) + max_A [best(A) + best(S ^ A)], singletons 0: the
    same O(3**N) recursion over all (2N - 3)!! trees.

    Parameters
    ----------
    log_marginals : ndarray of shape (2**N,)
        log P(C is a cluster) of every subset (the root's is 0).
    n_threads, verbose, owner
        As for :func:`best_bhc_tree`.

    Returns
    -------
    log_credibility : float
        Sum of the log marginals of the tree's clusters.
    parents, lefts : ndarray of shape (N - 1,)
        Its splits in preorder.
    """
    zeros = np.zeros(len(log_marginals))
    return _best_tree(log_marginals, zeros, False, n_threads, verbose, owner)

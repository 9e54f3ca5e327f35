"""Exact Bayesian hierarchical clustering over all 2**N subsets (driver of ``_bhc.pyx``)."""
import time

import numpy as np

from .._tree import splits_from_table
from . import _bhc as kernels
from ._subsets import subsets_by_size
from .hierarchical_trellis import _CHUNK_SPLITS, report_level


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
    order, level_start = subsets_by_size(n_points)
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
            report_level(owner, "best tree", size, n_points, len(parents), n_splits, start)
    full = (1 << n_points) - 1
    return float(log_best[full]), *splits_from_table(best_left, n_points)

"""The binary tree that maximises a score built from per-cluster values.

Two recursions share one kernel, driven level by level by
``best_tree.py``: Bayesian hierarchical clustering's q*(S) (log-add of the
cluster's own term) and the maximum-clade-credibility tree (sum of log
marginals). Trusts its input like every kernel here.
"""
from cython.parallel cimport prange
from libc.math cimport INFINITY

from .._common cimport log_add, low_bit, mask_t, next_submask


###############################################################################
# Bayesian hierarchical clustering: the tree with the largest DPM lower bound
#
# Heller & Ghahramani's q(T) = d_T p(D | T) of a tree T over S is the sum,
# over the partitions of S consistent with T, of prod_C a(C), with a(C) =
# alpha Gamma(|C|) p(D_C). It obeys q(T) = a(S) + q(T_L) q(T_R) for the
# subtrees T_L, T_R of the root, and since a(S) does not depend on the
# split, the largest q over all trees of S is
#
#     q*(S) = a(S) + max_A q*(A) q*(S ^ A),    q*({i}) = a({i}),
#
# a max-product recursion with one addition per subset: log q*(S) =
# log_add(log a(S), max_A [log q*(A) + log q*(S ^ A)]).
#
# The maximum-clade-credibility tree maximises the product of its clusters'
# marginals; in logs best(S) = log P(S) + max_A [best(A) + best(S ^ A)], the
# same loop with a plain addition.

def best_tree_level(const mask_t[::1] parents, const double[::1] log_cluster,
                    double[::1] log_best, mask_t[::1] best_left, bint log_add_cluster,
                    int n_threads):
    """Fill log_best(S) and its best split for `parents` (all of one size >= 2).

    log_best(S) = log_cluster[S] (+) max_A [log_best(A) + log_best(S ^ A)],
    where (+) is log_add when `log_add_cluster` (BHC's q*) and + otherwise
    (clade credibility). `log_best` holds every smaller subset (singletons
    as the caller set them). Ties go to the first split in increasing order
    of the left mask.
    """
    cdef Py_ssize_t i, n = parents.shape[0]
    cdef mask_t parent, low, rest, sub, left, arg, arg_odd, pair_bit
    cdef double best, best_odd, value
    cdef double* q = &log_best[0]
    if n == 0:
        return
    for i in prange(n, nogil=True, num_threads=n_threads, schedule="guided"):
        parent = parents[i]
        low = low_bit(parent)
        rest = parent ^ low
        # As in _hierarchical.inside_level: submasks of rest of ranks 2j and 2j + 1 differ
        # by its lowest bit, so two independent maxima walk them in pairs.
        pair_bit = low_bit(rest)
        rest = rest ^ pair_bit
        sub = 0
        best = -INFINITY
        best_odd = -INFINITY
        arg = low
        arg_odd = low
        while sub != rest:
            left = low | sub
            value = q[left] + q[parent ^ left]
            if value > best:
                best = value
                arg = left
            left = left | pair_bit
            value = q[left] + q[parent ^ left]
            if value > best_odd:
                best_odd = value
                arg_odd = left
            sub = next_submask(sub, rest)
        # Last pair: its odd member would be the parent itself.
        left = low | sub
        value = q[left] + q[parent ^ left]
        if value > best:
            best = value
            arg = left
        if best_odd > best or (best_odd == best and arg_odd < arg):
            best = best_odd
            arg = arg_odd
        if log_add_cluster:
            q[parent] = log_add(log_cluster[parent], best)
        else:
            q[parent] = log_cluster[parent] + best
        best_left[parent] = arg

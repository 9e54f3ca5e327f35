"""Subset enumeration shared by every exact kernel and table builder.

Subsets are N-bit masks (bit i <=> point i, see ``_common.pxd``). The
trellises process subsets by size ("levels"), and split tables list the
canonical left children of a parent in increasing order of the mask, the
order of ``next_submask``; both orders are defined here once.
"""
from libc.stdint cimport uint64_t

import numpy as np

from ._common cimport count_to_int, index_t, low_bit, mask_t, next_submask, popcount


def subsets_by_size(int n_points):
    """All 2**N masks sorted by size then value, and where each size starts.

    Returns
    -------
    order : ndarray of uint32, shape (2**N,)
    level_start : ndarray of int64, shape (N + 2,)
        Subsets of size k are ``order[level_start[k]:level_start[k + 1]]``.
    """
    cdef Py_ssize_t n_subsets = <Py_ssize_t>1 << n_points
    cdef mask_t[::1] order = np.empty(n_subsets, dtype=np.uint32)
    cdef index_t[::1] start = np.zeros(n_points + 2, dtype=np.int64)
    cdef index_t[::1] fill
    cdef Py_ssize_t s
    cdef int size
    for s in range(n_subsets):
        start[popcount(<mask_t>s) + 1] += 1
    for size in range(1, n_points + 2):
        start[size] += start[size - 1]
    fill = np.array(start[:n_points + 1], dtype=np.int64)
    for s in range(n_subsets):
        size = popcount(<mask_t>s)
        order[fill[size]] = <mask_t>s
        fill[size] += 1
    return np.asarray(order), np.asarray(start)


def canonical_lefts(const mask_t[::1] parents):
    """Every canonical left child of each parent, in the kernels' order.

    All parents must have the same size k; returns an array of shape
    (len(parents), 2**(k-1) - 1).
    """
    cdef Py_ssize_t i, j, n = parents.shape[0]
    cdef int size = popcount(parents[0]) if n else 1
    cdef Py_ssize_t n_splits = (<Py_ssize_t>1 << (size - 1)) - 1
    cdef mask_t[:, ::1] out = np.empty((n, n_splits), dtype=np.uint32)
    cdef mask_t parent, low, rest, sub
    for i in range(n):
        parent = parents[i]
        low = low_bit(parent)
        rest = parent ^ low
        sub = 0
        for j in range(n_splits):
            out[i, j] = low | sub
            sub = next_submask(sub, rest)
    return np.asarray(out)


def count_as_int(const uint64_t[:, ::1] counts, mask_t subset):
    """The exact count of `subset` in a (2**N, 2) table of (low, high) words."""
    return count_to_int(&counts[subset, 0])


def split_table_layout(int n_points):
    """Where each parent's canonical splits sit in a level-by-level split table.

    The table lists, for each size k = 2..N, the parents of size k in the
    order of `subsets_by_size`, and for each parent its 2**(k-1) - 1
    canonical splits in the order of `canonical_lefts`.

    Returns
    -------
    level_offset : ndarray of int64, shape (N + 1,)
        Start of the splits of size-k parents (entries 0 and 1 unused, 0).
    rank_in_level : ndarray of uint32, shape (2**N,)
        Position of each subset among the subsets of its size.
    n_splits : int
        Length of the table, sum_k C(N, k) (2**(k-1) - 1).
    """
    order, level_start = subsets_by_size(n_points)
    rank_in_level = np.empty(1 << n_points, dtype=np.uint32)
    rank_in_level[order] = (
        np.arange(1 << n_points) - np.repeat(level_start[: n_points + 1], np.diff(level_start))
    )
    per_level = np.zeros(n_points + 1, dtype=np.int64)
    sizes = np.arange(2, n_points + 1)
    per_level[2:] = np.diff(level_start)[2 : n_points + 1] * ((1 << (sizes - 1)) - 1)
    level_offset = np.concatenate([[0], np.cumsum(per_level)])[: n_points + 1]
    return level_offset, rank_in_level, int(per_level.sum())

"""Bookkeeping loops of the beam search (``sktrellis._engine.agglomerative.builders``).

A forest of the beam keeps, per slot (a cluster sits in the slot of its
lowest point), a row of up to ``width`` candidate partners: cluster ids
(-1 for an empty entry) and merge scores. A row is always a prefix of the
slot's partners ranked by score; ``complete[slot]`` says it holds all of
them. Everything here trusts its input.
"""
from libc.math cimport INFINITY

import numpy as np

from .._common cimport index_t


def update_rows(index_t[:, ::1] partner, double[:, ::1] partner_score,
                unsigned char[::1] complete, const index_t[::1] others,
                index_t a, index_t b, index_t new, const double[::1] scores):
    """Rows of the slots ``others`` after clusters a and b merged into ``new``.

    Entries for a and b are dropped (a prefix stays a prefix); ``new``,
    scored ``scores[i]`` against the cluster of slot ``others[i]``, joins a
    row that is complete and has room, or whose worst entry it beats (the
    prefix grows; a full row drops its worst and is no longer complete).
    Returns the slots left with an empty, incomplete row: they must be
    scored against every cluster again.
    """
    cdef Py_ssize_t n = others.shape[0], width = partner.shape[1], i, j
    cdef Py_ssize_t slot, count, worst_column, empty_column
    cdef double worst
    cdef index_t[::1] refill = np.empty(n, dtype=np.int64)
    cdef Py_ssize_t n_refill = 0
    with nogil:
        for i in range(n):
            slot = others[i]
            count = 0
            worst = INFINITY
            worst_column = -1
            empty_column = -1
            for j in range(width):
                if partner[slot, j] == a or partner[slot, j] == b:
                    partner[slot, j] = -1
                    partner_score[slot, j] = -INFINITY
                if partner[slot, j] < 0:
                    if empty_column < 0:
                        empty_column = j
                    continue
                count += 1
                if worst_column < 0 or partner_score[slot, j] < worst:
                    worst = partner_score[slot, j]
                    worst_column = j
            if complete[slot] and count < width:
                j = empty_column
            elif count > 0 and scores[i] > worst:
                j = empty_column if count < width else worst_column
            else:
                j = -1
            if complete[slot] and count == width:
                complete[slot] = 0
            if j >= 0:
                partner[slot, j] = new
                partner_score[slot, j] = scores[i]
                count += 1
            if count == 0 and not complete[slot]:
                refill[n_refill] = slot
                n_refill += 1
    return np.asarray(refill[:n_refill])


def row_entries(const index_t[:, ::1] partner, const double[:, ::1] partner_score,
                const index_t[::1] slots, const index_t[::1] low):
    """(slot, partner slot, score) of every entry of the rows of ``slots``."""
    cdef Py_ssize_t n = slots.shape[0], width = partner.shape[1], i, j, count = 0
    cdef index_t[::1] first = np.empty(n * width, dtype=np.int64)
    cdef index_t[::1] second = np.empty(n * width, dtype=np.int64)
    cdef double[::1] score = np.empty(n * width)
    cdef index_t slot
    with nogil:
        for i in range(n):
            slot = slots[i]
            for j in range(width):
                if partner[slot, j] >= 0:
                    first[count] = slot
                    second[count] = low[partner[slot, j]]
                    score[count] = partner_score[slot, j]
                    count += 1
    return np.asarray(first[:count]), np.asarray(second[:count]), np.asarray(score[:count])

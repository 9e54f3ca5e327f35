"""Heller & Ghahramani's greedy agglomeration: the merge of largest r_k first."""
import numpy as np

from ._recursion import _block_rows


def greedy_merges(forest, n_points):
    """Heller & Ghahramani's agglomeration: always merge the pair of largest r_k.

    The log r_k of every pair of current clusters is kept in a matrix
    indexed by *slot* (a merged cluster takes the lower slot of its two
    children, the other slot dies), with each slot's best partner and its
    score in two arrays. A merge takes the slot of largest best score (one
    vectorised argmax over N slots, cheaper than a heap of candidates whose
    Python pushes and stale pops dominated at N in the thousands) and scores
    the new cluster against all others in one vectorised batch of marginal
    likelihoods. A slot whose best partner was consumed keeps its old best
    score as an upper bound and rescans its row only if that bound comes
    first (lazy rescans). O(N**2) scores, O(N) vectorised work per merge
    besides the rescans, and one N x N float64 matrix of memory. Exact ties go to the
    pair of smallest (lower slot, higher slot), a slot being the lowest
    point index of its cluster.
    """
    scores = np.full((n_points, n_points), -np.inf)
    first, second = np.triu_indices(n_points, 1)
    block_pairs = _block_rows(forest.statistics.shape[1])
    for start in range(0, len(first), block_pairs):
        a = first[start : start + block_pairs]
        b = second[start : start + block_pairs]
        scores[a, b] = scores[b, a] = forest.score(a, b)
    del first, second
    node_of = np.arange(n_points)
    live = np.ones(n_points, dtype=bool)
    # argmax takes the first of equal values: the lowest partner of the
    # lowest slot among the best pairs, i.e. the smallest such pair.
    best = scores.argmax(axis=1)
    best_score = scores[np.arange(n_points), best]
    # A stale slot's best_score is only an upper bound of its row (best is
    # then meaningless); its row is rescanned when that bound comes first.
    stale = np.zeros(n_points, dtype=bool)
    merges = np.empty((n_points - 1, 2), dtype=np.int64)
    for k in range(n_points - 1):
        while True:
            slot = int(best_score.argmax())
            if not stale[slot]:
                break
            best[slot] = scores[slot].argmax()
            best_score[slot] = scores[slot, best[slot]]
            stale[slot] = False
        partner = int(best[slot])
        kept, gone = min(slot, partner), max(slot, partner)
        node = n_points + k
        merges[k] = node_of[kept], node_of[gone]
        forest.merge(node, node_of[kept], node_of[gone])
        node_of[kept] = node
        live[gone] = stale[gone] = False
        best_score[gone] = -np.inf
        scores[gone, :] = scores[:, gone] = -np.inf
        others = np.flatnonzero(live)
        others = others[others != kept]
        if not len(others):
            break
        row = np.empty(len(others))
        for start in range(0, len(others), block_pairs):
            block = others[start : start + block_pairs]
            row[start : start + len(block)] = forest.score(
                node_of[block], np.full(len(block), node)
            )
        scores[kept, others] = scores[others, kept] = row
        # Only the entries of columns kept and gone changed. An exact slot
        # whose best partner survives takes the new cluster if it beats (or
        # ties from a lower slot) its best. A slot whose best partner was
        # consumed, like a stale one, keeps its old best score as an upper
        # bound of its row, unless the new cluster is strictly above it and
        # so is the exact best; rescanning such rows at once instead
        # costs hundreds of rows per merge on clustered data.
        their_best, old = best[others], best_score[others]
        loose = stale[others] | (their_best == kept) | (their_best == gone)
        takes_new = np.where(
            loose, row > old, (row > old) | ((row == old) & (kept < their_best))
        )
        best[others[takes_new]] = kept
        best_score[others[takes_new]] = row[takes_new]
        stale[others] = loose & ~takes_new
        best[kept] = scores[kept].argmax()
        best_score[kept] = scores[kept, best[kept]]
    return merges


"""A flat point estimate of a posterior over trees: the partition agreeing best with its clusters.

A tree's cluster C, as the unit vector u_C = 1_C / sqrt(|C|) over the
points, agrees with a partition c to the degree ||Proj_c u_C||^2 =
sum over blocks B of |B & C|^2 / (|B| |C|), the squared cosine between C
and the blocks: 1 when C is a block, less the more C is cut or diluted.
The agreement of c with the posterior is the expected sum over the tree's
clusters, sum_C P(C) ||Proj_c u_C||^2, which is linear in the posterior
mean kernel K = sum_C P(C) u_C u_C^T (exact from the cluster marginals):

    agreement(c) = sum over blocks B of (1/|B|) sum_{i, j in B} K_ij.

Maximising it is k-means in the feature space of K (the posterior
expected within-cluster dispersion of the clusters' indicator vectors),
unlike a cut of one tree, which must keep that tree's root split. Single
points and the root are clusters of every tree and add the same amount to
every partition with k blocks. The search is Ward's agglomeration in that
feature space, then single-point moves while one improves the agreement.

A block of one point claims an outlier: that the point joins the others
only once whole blocks have formed, so that in a tree its sibling is a
union of other blocks. A humble posterior (close to the prior over trees,
under which every partition with k blocks has the same agreement) can
hand one out on the strength of tiny differences: on structureless
12-point data in 2, 3 and 5 features the best partition into 3 set a
point apart, 0.009-0.04 above the best one without, and the posterior
gave that point's claim 0.03-0.11, where a far point beside three tight
groups gets 0.93-1.00 (``benchmarks/bench_point_estimate.py``'s section
of benchmarks/README.md). So a single-point block is kept only when the posterior
probability of its claim (``outlier_support``, from posterior draws) is
at least ``OUTLIER_LEVEL``; the others are filled from the other blocks
(``singleton_free_labels``, ``keep_outliers_if_supported``).
"""
import numpy as np
from scipy.cluster.hierarchy import cut_tree, ward

# The kernel sum reads the marginals as a (high bits, low bits) matrix, a few
# rows at a time: its working memory stays a few tens of KiB at any N, as
# the fit's memory estimate (per-subset tables only) requires.
_LOW_BITS = 8
_BLOCK_DOUBLES = 1 << 12
#: A single-point block stays only if the posterior gives its claim (the
#: point's sibling is a union of other blocks) at least this probability.
OUTLIER_LEVEL = 0.5
#: Posterior trees drawn to estimate that probability (standard error at
#: most 0.016).
N_OUTLIER_DRAWS = 1000


def _bit_matrix(values, n_bits):
    """(len(values), n_bits) float 0/1 matrix: row r holds the bits of values[r]."""
    return ((values[:, None] >> np.arange(n_bits)) & 1).astype(np.float64)


def cluster_kernel(log_marginals, n_points):
    """K_ij = sum over clusters C holding i and j of P(C) / |C|, from log P(C) per mask.

    Single points and the root count as clusters of probability 1 (they are
    clusters of every tree), whatever the table holds for them.

    Parameters
    ----------
    log_marginals : ndarray of shape (2**n_points,)
        log P(C is a cluster of the tree) of every subset mask C.
    n_points : int

    Returns
    -------
    kernel : ndarray of shape (n_points, n_points)
        Symmetric positive semi-definite.
    """
    low_bits = min(n_points, _LOW_BITS)
    high_bits = n_points - low_bits
    low = _bit_matrix(np.arange(1 << low_bits), low_bits)
    low_sizes = low.sum(axis=1)
    rows_per_block = max(1, _BLOCK_DOUBLES >> low_bits)
    kernel = np.zeros((n_points, n_points))
    low_block = kernel[:low_bits, :low_bits]
    cross_block = kernel[:low_bits, low_bits:]
    high_block = kernel[low_bits:, low_bits:]
    low_weight = np.zeros(1 << low_bits)
    for first in range(0, 1 << high_bits, rows_per_block):
        highs = np.arange(first, min(first + rows_per_block, 1 << high_bits))
        high = _bit_matrix(highs, high_bits)
        masks = (highs[:, None] << low_bits) | np.arange(1 << low_bits)
        weights = np.exp(log_marginals[masks])
        # Single points and the root are added below, with probability 1.
        weights[(masks & (masks - 1)) == 0] = 0.0
        weights[masks == (1 << n_points) - 1] = 0.0
        weights /= np.maximum(high.sum(axis=1)[:, None] + low_sizes, 1.0)
        low_weight += weights.sum(axis=0)
        cross_block += low.T @ (weights.T @ high)
        high_block += (high.T * weights.sum(axis=1)) @ high
    low_block += (low.T * low_weight) @ low
    kernel[low_bits:, :low_bits] = cross_block.T
    kernel += np.eye(n_points) + 1.0 / n_points
    return kernel


def partition_agreement(kernel, labels):
    """sum over blocks B of (1/|B|) sum_{i, j in B} K_ij: the agreement the estimate maximises."""
    labels = np.asarray(labels)
    return float(sum(kernel[np.ix_(labels == b, labels == b)].sum() / np.sum(labels == b)
                     for b in np.unique(labels)))


def consensus_labels(kernel, n_clusters):
    """Labels 0..n_clusters-1 of a partition of large agreement with ``kernel``.

    Ward's agglomeration on the feature-space distances of the kernel, cut
    into ``n_clusters``, then the best single-point move (never emptying a
    block) while it raises the agreement: a local optimum, at least as good
    as the Ward cut.
    """
    n_points = len(kernel)
    if n_clusters == 1:
        return np.zeros(n_points, dtype=np.intp)
    diagonal = np.diag(kernel)
    squared = np.maximum(diagonal[:, None] + diagonal[None, :] - 2 * kernel, 0.0)
    condensed = np.sqrt(squared[np.triu_indices(n_points, 1)])
    labels = cut_tree(ward(condensed), n_clusters=n_clusters).ravel().astype(np.intp)
    return _improve_by_moves(kernel, labels, n_clusters)


def outlier_support(parents, lefts, labels, point):
    """The share of trees in which ``point``'s sibling is a union of whole blocks of ``labels``.

    The claim of a block of one point: it joins the rest only once whole
    blocks have formed (at the root, beside all the others, it is an
    outlier of the whole set).

    Parameters
    ----------
    parents, lefts : ndarray of shape (n_trees, n_points - 1)
        The splits of trees drawn from the posterior (``sample_splits``).
    labels : ndarray of shape (n_points,)
    point : int

    Returns
    -------
    support : float
    """
    labels = np.asarray(labels)
    parents = np.asarray(parents, dtype=np.uint64)
    lefts = np.asarray(lefts, dtype=np.uint64)
    rights = parents ^ lefts
    bit = np.uint64(1) << np.uint64(point)
    # Every tree has exactly one split with the point alone on a side.
    siblings = (np.where(lefts == bit, rights, 0) | np.where(rights == bit, lefts, 0)).max(axis=1)
    whole = np.ones(len(siblings), dtype=bool)
    for block in np.unique(labels):
        members = np.flatnonzero(labels == block).astype(np.uint64)
        mask = np.bitwise_or.reduce(np.uint64(1) << members)
        overlap = siblings & mask
        whole &= (overlap == 0) | (overlap == mask)
    return float(np.mean(whole))


def singleton_free_labels(kernel, labels, n_clusters, keep=()):
    """A partition of large agreement from ``labels`` with no block of one point but ``keep``.

    Each other block of one point takes the point, from a block of three
    or more, whose move raises the agreement most; then single-point moves
    that leave every block but ``keep`` at least two points while one
    raises the agreement.

    Parameters
    ----------
    kernel : ndarray of shape (n_points, n_points)
        ``cluster_kernel`` of the posterior.
    labels : ndarray of shape (n_points,)
        Blocks numbered 0 .. n_clusters - 1.
    n_clusters : int
    keep : sequence of int, default=()
        Blocks of one point to keep as they are.

    Returns
    -------
    labels : ndarray of shape (n_points,) or None
        None when the points are too few for every other block to have two.
    """
    n_points = len(kernel)
    min_sizes = np.full(n_clusters, 2, dtype=np.intp)
    min_sizes[list(keep)] = 1
    if n_points < min_sizes.sum():
        return None
    labels = np.asarray(labels).copy()
    for block in range(n_clusters):
        if np.sum(labels == block) != 1 or block in keep:
            continue
        sizes = np.bincount(labels, minlength=n_clusters)
        donors = np.flatnonzero(sizes[labels] > min_sizes[labels])
        moved = []
        for point in donors:
            candidate = labels.copy()
            candidate[point] = block
            moved.append(partition_agreement(kernel, candidate))
        labels[donors[int(np.argmax(moved))]] = block
    return _improve_by_moves(kernel, labels, n_clusters, min_sizes)


def keep_outliers_if_supported(kernel, labels, n_clusters, draw_splits):
    """``labels``, with each block of one point the posterior does not set apart filled.

    A block of one point is kept when the posterior probability of its
    claim (``outlier_support``) is at least ``OUTLIER_LEVEL``; the other
    single-point blocks take points from the rest, and no block falls to
    one point again (``singleton_free_labels``).

    Parameters
    ----------
    kernel : ndarray of shape (n_points, n_points)
        ``cluster_kernel`` of the posterior.
    labels : ndarray of shape (n_points,)
        ``consensus_labels(kernel, n_clusters)``.
    n_clusters : int
    draw_splits : callable
        ``draw_splits()`` -> (parents, lefts) of trees drawn from the
        posterior (``sample_splits``); called only when ``labels`` have a
        single-point block.

    Returns
    -------
    labels : ndarray of shape (n_points,)
    """
    labels = np.asarray(labels)
    single = np.flatnonzero(np.bincount(labels, minlength=n_clusters) == 1)
    if len(single) == 0:
        return labels
    parents, lefts = draw_splits()
    supported = [block for block in single
                 if outlier_support(parents, lefts, labels, np.flatnonzero(labels == block)[0])
                 >= OUTLIER_LEVEL]
    if len(supported) == len(single):
        return labels
    filled = singleton_free_labels(kernel, labels, n_clusters, supported)
    return labels if filled is None else filled


def _improve_by_moves(kernel, labels, n_clusters, min_sizes=None):
    """Apply the best agreement-raising single-point move until there is none.

    ``min_sizes``: the fewest points each block keeps (None: one).
    """
    min_sizes = np.ones(n_clusters, dtype=np.intp) if min_sizes is None else min_sizes
    n_points = len(kernel)
    tolerance = 1e-12 * max(np.trace(kernel), 1.0)
    for _ in range(n_points * n_points):
        one_hot = np.zeros((n_points, n_clusters))
        one_hot[np.arange(n_points), labels] = 1.0
        sizes = one_hot.sum(axis=0)
        to_block = kernel @ one_hot                  # sum of K_ij over j in each block
        totals = np.einsum("ib,ib->b", one_hot, to_block)
        diagonal = np.diag(kernel)
        own = labels
        # Block totals after point i leaves its block / joins block b.
        own_size = sizes[own]
        left_total = totals[own] - 2 * to_block[np.arange(n_points), own] + diagonal
        with np.errstate(divide="ignore", invalid="ignore"):
            leave_gain = np.where(
                own_size > min_sizes[own], left_total / (own_size - 1), -np.inf
            ) - totals[own] / own_size
        join_gain = ((totals[None, :] + 2 * to_block + diagonal[:, None]) / (sizes + 1)
                     - totals / sizes)
        gain = leave_gain[:, None] + join_gain
        gain[np.arange(n_points), own] = -np.inf
        point, block = np.unravel_index(np.argmax(gain), gain.shape)
        if not gain[point, block] > tolerance:
            break
        labels = labels.copy()
        labels[point] = block
    return labels

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
"""
import numpy as np
from scipy.cluster.hierarchy import cut_tree, ward

# The kernel sum reads the marginals as a (high bits, low bits) matrix, a few
# rows at a time: its working memory stays a few tens of KiB at any N, as
# the fit's memory estimate (per-subset tables only) requires.
_LOW_BITS = 8
_BLOCK_DOUBLES = 1 << 12


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


def _improve_by_moves(kernel, labels, n_clusters):
    """Apply the best agreement-raising single-point move until there is none."""
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
                own_size > 1, left_total / (own_size - 1), -np.inf
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

"""BHC's recursion over the nodes of a tree: d_k, p(D_k | T_k) and r_k of every node."""
import numpy as np
from scipy.special import gammaln

# Candidate merges are scored this many at a time.
_BLOCK_PAIRS = 1 << 15
# ... and at most this many bytes of statistics rows a block: scoring a pair
# holds about five rows of statistics at its peak (the two rows gathered,
# their sum and the factorisation's temporaries; measured 5.2 for "full"),
# so a block of full covariances of 400 features is 52 pairs, not 780 pairs
# and 5 GiB. The memory estimate counts six.
_BLOCK_BYTES = 64 * 2**20
_ROWS_PER_SCORED_PAIR = 6


def merge_recursion(log_alpha, size, log_marginal, log_d_left, log_tree_left,
                    log_d_right, log_tree_right):
    """One step of BHC's recursion, in log space and vectorised over merges.

    For a node k of ``size`` points whose data D_k has log marginal
    likelihood ``log_marginal`` under one component (hypothesis H1),
    children with d and p(D | T) given::

        d_k = alpha Gamma(n_k) + d_left d_right,   pi_k = alpha Gamma(n_k) / d_k,
        p(D_k | T_k) = pi_k p(D_k | H1) + (1 - pi_k) p(D_left | T_left) p(D_right | T_right),
        r_k = pi_k p(D_k | H1) / p(D_k | T_k).

    Returns
    -------
    log_d, log_tree, log_r : ndarray
        log d_k, log p(D_k | T_k) and log r_k.
    """
    log_one_cluster = log_alpha + gammaln(size)
    log_split = log_d_left + log_d_right
    log_d = np.logaddexp(log_one_cluster, log_split)
    # pi_k p(D_k | H1) and (1 - pi_k) p_left p_right, with 1 - pi_k = d_l d_r / d_k.
    merged = log_one_cluster - log_d + log_marginal
    apart = log_split - log_d + log_tree_left + log_tree_right
    log_tree = np.logaddexp(merged, apart)
    return log_d, log_tree, merged - log_tree


class _NodeTable:
    """Every node's statistics and BHC quantities, leaves 0..N-1 then merges."""

    def __init__(self, component, X, log_alpha):
        self.component = component
        self.log_alpha = log_alpha
        leaves = component.statistics(X)
        n_points = len(leaves)
        n_nodes = 2 * n_points - 1
        self.statistics = np.empty((n_nodes, leaves.shape[1]))
        self.statistics[:n_points] = leaves
        self.size = np.ones(n_nodes)
        self.log_marginal = np.empty(n_nodes)
        self.log_marginal[:n_points] = component.log_marginal(leaves)
        # A leaf has d = alpha and p(D | T) = p(D | H1).
        self.log_d = np.full(n_nodes, log_alpha)
        self.log_tree = self.log_marginal.copy()
        self.log_r = np.zeros(n_nodes)

    def score(self, a, b):
        """log r_k of merging nodes a and b (arrays), without storing anything."""
        log_marginal = self.component.log_marginal(self.statistics[a] + self.statistics[b])
        return merge_recursion(
            self.log_alpha, self.size[a] + self.size[b], log_marginal,
            self.log_d[a], self.log_tree[a], self.log_d[b], self.log_tree[b],
        )[2]

    def merge(self, node, a, b):
        """Store node = a + b and its BHC quantities."""
        self.statistics[node] = self.statistics[a] + self.statistics[b]
        self.size[node] = self.size[a] + self.size[b]
        self.log_marginal[node] = self.component.log_marginal(self.statistics[node])[0]
        self.log_d[node], self.log_tree[node], self.log_r[node] = merge_recursion(
            self.log_alpha, self.size[node], self.log_marginal[node],
            self.log_d[a], self.log_tree[a], self.log_d[b], self.log_tree[b],
        )


def _block_rows(width):
    """Pairs (or clusters) scored at once for statistics of ``width`` floats."""
    return int(max(1, min(_BLOCK_PAIRS, _BLOCK_BYTES // (8 * width))))



def lower_bound(forest, alpha):
    """log p(D | T) + log d_T + log Gamma(alpha) - log Gamma(alpha + N) at the root."""
    n_points = (len(forest.size) + 1) // 2
    return float(
        forest.log_tree[-1] + forest.log_d[-1] + gammaln(alpha) - gammaln(alpha + n_points)
    )


def tree_lower_bound(X, merges, component, alpha):
    """The DPM evidence lower bound of a fixed tree under these hyperparameters."""
    n_points = X.shape[0]
    forest = _NodeTable(component, X, float(np.log(alpha)))
    for k, (a, b) in enumerate(merges):
        forest.merge(n_points + k, a, b)
    return lower_bound(forest, alpha)

"""Certified exact MAP trees past the trellis: best-first search with admissible bounds.

The full trellis needs all 2**N subsets. For Dasgupta's cost a best-first
branch and bound over clusters finds the MAP tree of larger N when the data
have structure, and otherwise stops at a budget with a certified gap.
"""
import heapq
import time
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, ClusterMixin, _fit_context
from sklearn.utils._param_validation import Interval

from ._estimator import EnergyEstimatorMixin
from ._tree import linkage_from_merges
from .baselines._search import beam_search
from .energies import Dasgupta

# The lazy split generators may pop at most this many partial assignments
# per allowed cluster expansion: max_clusters bounds the work
# deterministically, max_time by the clock.
_POPS_PER_CLUSTER = 1 << 14
# Points are Python ints in bit masks, so N is not bounded by a word size;
# the triple table of the bound has N**3 entries.
MAX_SEARCH_POINTS = 256


class _BudgetExhausted(Exception):
    """The search hit max_time or max_clusters."""


def dasgupta_triplet_bound(weights):
    """Per-triple terms of the admissible bound on Dasgupta's cost.

    Dasgupta's cost of a tree is ``sum over pairs i < j of w_ij |C_ij|``,
    with C_ij the smallest cluster holding i and j. ``|C_ij| = 2 + #{k in
    C_ij}``, and of the three pairs of a triple {i, j, k} exactly one (the
    pair merged first) has the third point outside its smallest cluster; the
    two others have it inside. So the cost of any tree over a set S is

        2 W(S) + sum over triples of S of (w_ij + w_ik + w_jk - w_first),

    and, since the first-merged pair weighs at most the triple's largest
    weight, at least ``2 W(S) + sum over triples of (sum of the two smallest
    weights)``: the *triplet bound*, a lower bound on the cost (an upper
    bound on the log potential -beta * cost) of every tree over S, equal to
    it when every triple merges its most similar pair first.

    Parameters
    ----------
    weights : ndarray of shape (n, n)
        Non-negative symmetric similarities.

    Returns
    -------
    triples : ndarray of shape (n, n, n)
        ``triples[i, j, k]`` = sum of the two smallest of w_ij, w_ik, w_jk
        for distinct i, j, k, 0 otherwise; the bound of S is
        ``2 W(S) + triples[S][:, S][:, :, S].sum() / 6``.
    """
    w = np.asarray(weights, dtype=np.float64)
    n = len(w)
    ij = w[:, :, None]
    ik = w[:, None, :]
    jk = w[None, :, :]
    total = ij + ik + jk
    largest = np.maximum(np.maximum(ij, ik), jk)
    triples = total - largest
    index = np.arange(n)
    distinct = (
        (index[:, None, None] != index[None, :, None])
        & (index[:, None, None] != index[None, None, :])
        & (index[None, :, None] != index[None, None, :])
    )
    return np.where(distinct, triples, 0.0)


class _DasguptaSearch:
    """Memoised best-first branch and bound for the minimum Dasgupta cost.

    best(S) = min over splits (A, B) of |S| W(A, B) + best(A) + best(B). The
    splits of S are generated lazily, cheapest bound first, by a best-first
    search over partial assignments of the points of S to the two sides
    (the lowest point always on side A): for sides A', B' and unassigned U
    every completion costs at least

        |S| (W(A', B') + sum_{u in U} min(W(u, A'), W(u, B'))) + L(A') + L(B'),

    L the triplet bound, which only grows with its set. A complete
    assignment's bound is |S| W(A, B) + L(A) + L(B) <= its true cost, and
    splits come out in non-decreasing bound, so once a split's bound reaches
    the best cost found, no later split can beat it.
    """

    def __init__(self, weights, max_clusters, deadline):
        # Self-similarities never enter the cost.
        self.w = np.array(weights, dtype=np.float64)
        np.fill_diagonal(self.w, 0.0)
        self.n_points = len(self.w)
        self.root = (1 << self.n_points) - 1
        # Progress at the root, for the certificate of an interrupted search:
        # the bound of the root split being worked on (every root split not
        # yet resolved has at least this bound) and the best root split.
        self.root_bound = 0.0
        self.root_best = None
        self.triples = dasgupta_triplet_bound(self.w)
        self.exact = {}        # cluster -> (cost, left part) of its best tree
        self.lower = {}        # cluster -> proven lower bound on its best cost
        self.n_expanded = 0
        self.n_popped = 0
        self.max_clusters = max_clusters
        self.deadline = deadline

    def members(self, mask):
        return [i for i in range(self.n_points) if mask >> i & 1]

    def bound(self, mask):
        idx = self.members(mask)
        if len(idx) < 2:
            return 0.0
        sub = self.w[np.ix_(idx, idx)]
        triples = self.triples[np.ix_(idx, idx, idx)].sum() / 6.0 if len(idx) > 2 else 0.0
        return float(sub.sum() + triples)     # 2 W(S) = the full symmetric sum

    def splits(self, mask):
        """(bound, cut, A, B) of the splits of mask, in non-decreasing bound."""
        points = self.members(mask)
        size = len(points)
        w = self.w
        first = points[0]
        # State: (bound, tiebreak, depth, A, B, W(A, B), L(A), L(B), and for
        # the points not yet assigned, rest[depth:], their weight to A and B)
        rest = points[1:]
        to_a = w[first, rest].copy()
        to_b = np.zeros(len(rest))
        heap = [(size * float(np.minimum(to_a, to_b).sum()), 0, 0, 1 << first, 0, 0.0,
                 0.0, 0.0, to_a, to_b)]
        counter = 1
        while heap:
            self.n_popped += 1
            if self.n_popped % 4096 == 0 and (
                time.monotonic() > self.deadline
                or self.n_popped > _POPS_PER_CLUSTER * self.max_clusters
            ):
                raise _BudgetExhausted
            bound, _, depth, a, b, cut, la, lb, to_a, to_b = heapq.heappop(heap)
            if depth == len(rest):
                if b:
                    yield bound, size * cut, a, b
                continue
            u = rest[depth]
            later = rest[depth + 1 :]
            for side in (0, 1):
                if side == 0:
                    new_a, new_b = a | (1 << u), b
                    new_cut = cut + to_b[0]
                    new_la = la + 2 * to_a[0] + self._triple_gain(u, self.members(a))
                    new_lb = lb
                    na = to_a[1:] + w[u, later]
                    nb = to_b[1:]
                else:
                    new_a, new_b = a, b | (1 << u)
                    new_cut = cut + to_a[0]
                    new_lb = lb + 2 * to_b[0] + self._triple_gain(u, self.members(b))
                    new_la = la
                    na = to_a[1:]
                    nb = to_b[1:] + w[u, later]
                new_bound = size * (new_cut + float(np.minimum(na, nb).sum())) + new_la + new_lb
                heapq.heappush(heap, (new_bound, counter, depth + 1, new_a, new_b, new_cut,
                                      new_la, new_lb, na, nb))
                counter += 1

    def _triple_gain(self, u, members):
        """Triplet-bound terms gained by adding u to a set with these members."""
        if len(members) < 2:
            return 0.0
        block = self.triples[u][np.ix_(members, members)]
        return float(block.sum() / 2.0)

    def _tick(self):
        self.n_expanded += 1
        if self.n_expanded > self.max_clusters or time.monotonic() > self.deadline:
            raise _BudgetExhausted

    def solve(self, mask, limit):
        """(cost, True): the exact best cost of mask, when below limit;
        (bound, False): a lower bound of it, at least limit.

        The flag, not a comparison with limit, says which: rounding in
        ``limit`` must not pass a bound off as a cost.
        """
        if mask & (mask - 1) == 0:
            return 0.0, True
        if mask in self.exact:
            return self.exact[mask][0], True
        known = self.lower.get(mask)
        if known is None:
            known = self.bound(mask)
            self.lower[mask] = known
        if known >= limit:
            return known, False
        self._tick()
        best, best_left = limit, None
        for bound, cut, a, b in self.splits(mask):
            if mask == self.root:
                self.root_bound = bound
            if bound >= best:
                break
            low_b = self.lower.get(b) or self.bound(b)
            cost_a, exact_a = self.solve(a, best - cut - low_b)
            if not exact_a or cut + cost_a + low_b >= best:
                continue
            cost_b, exact_b = self.solve(b, best - cut - cost_a)
            if exact_b and cut + cost_a + cost_b < best:
                best, best_left = cut + cost_a + cost_b, a
                if mask == self.root:
                    self.root_best = (best, a)
        if best_left is not None:
            self.exact[mask] = (best, best_left)
            return best, True
        # Every split costs at least limit: a proven lower bound.
        self.lower[mask] = max(self.lower[mask], limit)
        return self.lower[mask], False

    def tree_splits(self, mask, root_left=None):
        """(parent, left) of the best tree of mask, from the memo (exact clusters only).

        ``root_left`` overrides the root's split (the best root split found
        by an interrupted search, whose two children are exact).
        """
        out, stack = [], [mask]
        while stack:
            parent = stack.pop()
            if parent & (parent - 1) == 0:
                continue
            left = root_left if parent == mask and root_left is not None else self.exact[parent][1]
            out.append((parent, left))
            stack.extend((parent ^ left, left))
        return out


class BestFirstHierarchicalClustering(EnergyEstimatorMixin, ClusterMixin, BaseEstimator):
    """Certified MAP tree of Dasgupta's energy beyond the trellis, by branch and bound.

    The exact trellis tabulates all 2**N subsets; this estimator searches
    the clusters instead, keeping only those it visits (in a dictionary
    keyed by their bit masks, any N). Each cluster's splits come out
    lazily, cheapest *bound* first (never all 2**(|S|-1) of them at once),
    where the bound is Dasgupta's triplet bound (see
    :func:`dasgupta_triplet_bound`, admissible: never above the best cost).
    A split is expanded only while its bound is below the best tree found,
    starting from the beam-search tree. With a budget (``max_time``,
    ``max_clusters``) the search stops early and reports the best tree
    with a certified ``optimality_gap_``; 0 means proven optimal.

    Only :class:`~sktrellis.energies.Dasgupta` has a bound here so far;
    correlation clustering and Ginkgo are refused with a ValueError.

    Parameters
    ----------
    energy : Dasgupta, default=None
        None means ``Dasgupta()``.
    n_clusters : int, default=2
        Number of flat clusters of ``labels_``, cut from the tree.
    beam_width : int, default=5
        Width of the beam search giving the first incumbent tree.
    max_time : float, default=60.0
        Seconds of search at most; None for no limit.
    max_clusters : int, default=1_000_000
        Clusters expanded at most (memory: the memo holds about this many
        entries); the split generators may also pop at most 16,384 partial
        splits per allowed cluster. Unlike ``max_time`` this budget gives
        the same result on every run.

    Attributes
    ----------
    linkage_matrix_ : ndarray of shape (n_samples - 1, 4)
        The best tree found, in scipy format.
    map_log_potential_ : float
        Its log potential, ``-beta * Dasgupta cost``.
    optimality_gap_ : float
        Certified upper bound on (MAP log potential - ``map_log_potential_``):
        0.0 when the search finished, i.e. the tree is proven optimal.
    n_expanded_ : int
        Clusters expanded.
    labels_, children_, distances_, n_leaves_, tree_, n_features_in_
        As for :class:`~sktrellis.ExactHierarchicalClustering`.

    References
    ----------
    S. Dasgupta. A cost function for similarity-based hierarchical
    clustering. STOC 2016.

    Examples
    --------
    >>> from sklearn.datasets import make_blobs
    >>> from sktrellis.search import BestFirstHierarchicalClustering
    >>> X, _ = make_blobs(n_samples=10, centers=2, random_state=0)
    >>> model = BestFirstHierarchicalClustering().fit(X)
    >>> model.optimality_gap_
    0.0
    """

    _parameter_constraints = {
        "energy": [Dasgupta, None],
        "n_clusters": [Interval(Integral, 1, None, closed="left")],
        "beam_width": [Interval(Integral, 1, None, closed="left")],
        "max_time": [Interval(Real, 0, None, closed="neither"), None],
        "max_clusters": [Interval(Integral, 1, None, closed="left")],
    }

    _default_energy = Dasgupta

    def __init__(self, energy=None, *, n_clusters=2, beam_width=5, max_time=60.0,
                 max_clusters=1_000_000):
        self.energy = energy
        self.n_clusters = n_clusters
        self.beam_width = beam_width
        self.max_time = max_time
        self.max_clusters = max_clusters

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Search the MAP tree of X under Dasgupta's energy.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Features, or similarities with ``affinity="precomputed"``.
        y : Ignored
            Not used, present for API consistency.

        Returns
        -------
        self : object
            Fitted estimator.
        """
        X = self._validate_training_data(X)
        n_points = len(X)
        if n_points > MAX_SEARCH_POINTS:
            raise ValueError(
                f"{type(self).__name__} keeps an N**3 triple table: n_samples={n_points} "
                f"is above its limit of {MAX_SEARCH_POINTS}; use SparseTrellisClustering"
            )
        energy = self._energy()
        weights = energy.similarities(X)
        beta = float(energy.beta)
        incumbent = beam_search(energy.merge_model(X), self.beam_width)[0]
        incumbent_cost = -float(np.sum(incumbent.log_potentials)) / beta if beta > 0 else 0.0
        deadline = time.monotonic() + (np.inf if self.max_time is None else self.max_time)
        search = _DasguptaSearch(weights, self.max_clusters, deadline)
        full = (1 << n_points) - 1
        # Strictly below the incumbent: equal costs keep the beam tree.
        limit = incumbent_cost - 1e-12 * max(1.0, abs(incumbent_cost))
        try:
            search.solve(full, limit)
            finished = True
        except _BudgetExhausted:
            finished = False
        if search.root_best is not None:
            # A tree better than the beam search's: the best root split with
            # its children's exact best trees.
            cost, root_left = search.root_best
            merges, log_potentials = self._merges(search, full, root_left, beta)
        else:
            cost = incumbent_cost
            merges, log_potentials = incumbent.merges, incumbent.log_potentials
        self._set_tree(linkage_from_merges(merges, log_potentials), self.n_clusters)
        self.map_log_potential_ = float(np.sum(log_potentials))
        # Finished: every root split was resolved, the tree is optimal.
        # Interrupted: every unresolved root split costs at least the bound
        # of the one in progress (splits come in non-decreasing bound).
        self.optimality_gap_ = 0.0 if finished else max(0.0, beta * (cost - search.root_bound))
        self.n_expanded_ = search.n_expanded
        return self

    def _merges(self, search, full, root_left, beta):
        """Children-first merges and log potentials of the searched best tree."""
        splits = search.tree_splits(full, root_left)
        node_of = {1 << i: i for i in range(search.n_points)}
        merges, log_potentials = [], []
        for parent, left in sorted(splits, key=lambda s: bin(s[0]).count("1")):
            right = parent ^ left
            a = [i for i in range(search.n_points) if left >> i & 1]
            b = [i for i in range(search.n_points) if right >> i & 1]
            cut = search.w[np.ix_(a, b)].sum()
            merges.append((node_of[left], node_of[right]))
            log_potentials.append(-beta * bin(parent).count("1") * cut)
            node_of[parent] = search.n_points + len(merges) - 1
        return np.array(merges), np.array(log_potentials)

"""Admissible bounds for exact best-first search over trees (issue 14).

The search of :class:`~sktrellis.search.BestFirstHierarchicalClustering`
minimises the *cost* of a tree, ``-log phi = sum over inner nodes of
-log psi(A, B)``, and never tabulates the 2**N subsets: every quantity here
is computed from the raw pairwise matrix for one cluster at a time, given
as the sorted array of its points (``members``).

A bound object provides

- ``split_cost(members, in_a)``: ``-log psi(A, B)`` of one split, exactly;
- ``lower(members)``: a lower bound on the cost of every tree over the
  cluster (so ``-lower`` is an upper bound on the best subtree's log
  potential), exact for one and two points;
- ``base(members)`` and ``increments(members, sides, position, side)``:
  the pieces of a lower bound on ``split_cost + lower(A) + lower(B)`` over
  every split consistent with a partial assignment of the points to the two
  sides, which the search uses to generate the splits of a cluster lazily,
  in order of that bound (see ``_SplitGenerator`` in
  :mod:`sktrellis.search`). The bound of a partial assignment is
  ``base + scale * (assigned + sum over unassigned u of min(pen_A(u),
  pen_B(u)))``, where ``assigned`` is what the assigned points already pay
  and ``pen_X(u)`` what u would pay with the assigned points on side X;
  ``increments`` returns how assigning one more point changes ``pen_A`` and
  ``pen_B`` of every point.
"""
import numpy as np

from .._trellis._search import dasgupta_increments, triple_max_sum
from ._correlation import CorrelationClustering
from ._dasgupta import Dasgupta
from ._ginkgo import GinkgoLikelihood, ginkgo_log_psi

# Boolean masks i < j < k of an (m, m, m) array, by m: triples of a cluster.
_TRIPLES = {}


def _triples(m):
    if m not in _TRIPLES:
        i, j, k = np.ogrid[:m, :m, :m]
        _TRIPLES[m] = (i < j) & (j < k)
    return _TRIPLES[m]


def _triple_min_sum(sub):
    """Sum over the triples {i, j, k} of ``sub`` of min(w_ij, w_ik, w_jk)."""
    m = len(sub)
    if m < 3:
        return 0.0
    smallest = np.minimum(np.minimum(sub[:, :, None], sub[:, None, :]), sub[None, :, :])
    return float(smallest[_triples(m)].sum())


class DasguptaBound:
    """The triplet bound of Dasgupta's cost.

    Cost of a tree T over S: ``beta * sum_{inner v} |v| W(left, right) =
    beta * sum_{i<j} w_ij |lca(i, j)|``. Write ``|lca(i, j)| = 2 + #{k in S:
    k in lca(i, j)}``. In a triple {i, j, k} the tree first joins one pair,
    say (i, j), and then k: k is not under lca(i, j), while j is under
    lca(i, k) and i under lca(j, k). So the triple adds ``w_ik + w_jk =
    (w_ij + w_ik + w_jk) - w_ij`` to the cost, and

    ``cost(T) = beta * (2 W(S) + sum over triples of (sum of its three
    weights - weight of the pair T joins first))``

    ``>= beta * (2 W(S) + sum over triples of its two smallest weights) =:
    lower(S)``, since the pair joined first weighs at most the triple's
    largest weight. Equality for |S| <= 3 and when the tree joins the
    heaviest pair of every triple first.

    For a split (A, B) of S the same identity gives ``split_cost(A, B) +
    lower(A) + lower(B) = lower(S) + beta * sum over the triples the split
    separates of (max weight - weight of the pair kept on one side)``: each
    separated triple has its two cross pairs paid by the split and the
    triples inside A or B are counted by lower(A) and lower(B). Every term
    is non-negative, so a partial assignment of points to sides bounds all
    its completions from below by the separated triples among the assigned
    points (``assigned``) plus, for each unassigned u, the cheaper side for
    the triples (u, i, j) with i and j assigned (disjoint triple sets for
    distinct u).

    Parameters
    ----------
    similarities : ndarray of shape (n, n)
        Non-negative similarities, zero diagonal.
    beta : float
        Inverse temperature of :class:`~sktrellis.energies.Dasgupta`.
    """

    def __init__(self, similarities, beta):
        self.w = np.array(similarities, dtype=np.float64, order="C")
        np.fill_diagonal(self.w, 0.0)
        self.beta = float(beta)
        self.scale = self.beta

    # The key of a complete split is its bound already.
    refine = False

    def split_cost(self, members, in_a):
        a, b = members[in_a], members[~in_a]
        return self.beta * len(members) * float(self.w[np.ix_(a, b)].sum())

    def lower(self, members):
        m = len(members)
        pairs = float(self.w[np.ix_(members, members)].sum()) / 2
        # sum of two smallest = sum of all three - the largest; each pair is in m - 2 triples.
        two_smallest = (m - 2) * pairs - triple_max_sum(self.w, members) if m >= 3 else 0.0
        return self.beta * (2 * pairs + two_smallest)

    base = lower

    def increments(self, members, sides, position, side, pen_a, pen_b):
        """Add to pen_a, pen_b what ``members[position]`` going to ``side`` costs the others.

        ``sides[:position]`` holds the sides (0 = A, 1 = B) of the points
        assigned before; only entries after ``position`` change.
        """
        dasgupta_increments(self.w, members, sides, position, side, pen_a, pen_b)


class CorrelationBound:
    """A lower bound on the hierarchical correlation-clustering cost.

    A split costs ``beta * (P_cross(A, B) + N(A) + N(B))`` with P the
    positive weight and N the magnitude of the negative weight inside a set.
    Summing over a tree, every positive pair is cut exactly once and a
    negative pair is paid at every inner node below the root that holds it,
    so ``cost(T over S) = beta * (P(S) + sum over the inner nodes v != root
    of N(v))`` (singletons hold no pair). The root's two children keep, in
    every triple of S, at least one pair on one side (two sides, three
    points), and a kept pair is paid at least at that child. Each pair lies
    in |S| - 2 triples, so

    ``cost(T) >= beta * (P(S) + sum over triples of the smallest negative
    magnitude among its pairs / (|S| - 2)) =: lower(S)``.

    For a split (A, B): ``split_cost + lower(A) + lower(B) >= beta * (P(S)
    + N(A) + N(B))`` as ``P_cross + P(A) + P(B) = P(S)``; with a partial
    assignment, N(A) + N(B) is at least the negative weight among the
    assigned points of each side plus, for each unassigned u, the smaller
    of its negative weight to the assigned points of A and of B.
    ``lower`` alone is weak (the 1 / (|S| - 2) factor); most of the pruning
    comes from the split keys (all 24 benchmark cases up to N = 20 proven
    optimal in under a second, see benchmarks/README.md).

    Parameters
    ----------
    weights : ndarray of shape (n, n)
        Signed weights, zero diagonal.
    beta : float
        Inverse temperature of :class:`~sktrellis.energies.CorrelationClustering`.
    """

    def __init__(self, weights, beta):
        weights = np.array(weights, dtype=np.float64)
        np.fill_diagonal(weights, 0.0)
        self.pos = weights.clip(min=0)
        self.neg = -weights.clip(max=0)
        self.beta = float(beta)
        self.scale = self.beta

    # Splits leave in order of the partial-assignment key, cheaper than lower(A) + lower(B).
    refine = False

    def split_cost(self, members, in_a):
        a, b = members[in_a], members[~in_a]
        kept = self.neg[np.ix_(a, a)].sum() + self.neg[np.ix_(b, b)].sum()
        return self.beta * float(self.pos[np.ix_(a, b)].sum() + kept / 2)

    def base(self, members):
        return self.beta * float(self.pos[np.ix_(members, members)].sum()) / 2

    def lower(self, members):
        m = len(members)
        kept = 0.0
        if m >= 3:
            kept = _triple_min_sum(self.neg[np.ix_(members, members)]) / (m - 2)
        return self.base(members) + self.beta * kept

    def increments(self, members, sides, position, side, pen_a, pen_b):
        """Add to pen_a, pen_b what ``members[position]`` going to ``side`` costs the others."""
        (pen_a if side == 0 else pen_b)[position + 1:] += self.neg[
            members[position + 1:], members[position]
        ]


class GinkgoBound:
    """An upper bound on the Ginkgo log likelihood of any tree over a cluster.

    Write ``n(tau) = log(1 - exp(-lam))``. Every inner node v of a tree of
    non-zero likelihood has ``t_v >= t_cut``, and masses are superadditive
    (``sqrt t_P >= sqrt t_a + sqrt t_b``), so ``t_P' >= t_b``. Bounds on the
    two terms of ``log psi``:

    - a leaf child: ``log(1 - exp(-lam t_cut / tau)) - n <= -n`` for any tau;
      with ``tau = t_P >= t_cut`` (the heavier child) ``<= 0``;
    - the heavier child when inner (always, once the node has 3 or more
      points, as inner masses exceed leaf masses 0): with ``t_a >= t_cut``,
      ``g(t_P, t_a) <= log(lam / t_P) - lam t_cut / t_P - n =: H(t_P)``;
    - the lighter child when inner: ``g(tau, t_b) = log(lam / tau) - lam
      t_b / tau - n`` over ``tau >= t_b >= t_cut`` is largest at ``tau =
      max(lam, 1) t_b`` and then decreases in t_b, so it is at most its
      value at ``t_b = t_cut``: ``L_inner``.

    So the root split of a cluster S of 3 or more points has ``log psi <=
    G(t_S) = H(t_S) + max(-n, L_inner) - log(4 pi)``, any inner node at most
    ``G_max = max(max_{t >= t_cut} G(t), -log(4 pi))`` (the second for two
    leaves, whose terms are <= 0), and the |S| - 2 inner nodes below the
    root at most G_max each:
    ``log phi(T over S) <= G(t_S) + (|S| - 2) G_max``, and ``-inf`` (cost
    +inf) when ``t_S < t_cut``. It knows nothing of how the points pair
    up, so it prunes little: expect the gap, not a proof, past small N.

    Parameters
    ----------
    momenta : ndarray of shape (n, 4)
        Four-momenta (E, px, py, pz), validated.
    lam, t_cut : float
        Parameters of :class:`~sktrellis.energies.GinkgoLikelihood`.
    """

    scale = 0.0
    # The split order comes from the complete split's own bound.
    refine = True

    def __init__(self, momenta, lam, t_cut):
        self.momenta = np.asarray(momenta, dtype=np.float64)
        self.lam, self.t_cut = float(lam), float(t_cut)
        self.log_norm = float(np.log(-np.expm1(-self.lam)))
        t_star = max(self.lam, 1.0) * self.t_cut
        self.light_max = max(
            -self.log_norm,
            np.log(self.lam / t_star) - self.lam * self.t_cut / t_star - self.log_norm,
        )
        # H(t) = log(lam / t) - lam t_cut / t - n peaks at t = lam t_cut (or t_cut).
        peak = max(self.lam * self.t_cut, self.t_cut)
        self.node_max = max(self._root(peak), -np.log(4 * np.pi))

    def _root(self, mass2):
        heavy = np.log(self.lam / mass2) - self.lam * self.t_cut / mass2 - self.log_norm
        return heavy + self.light_max - np.log(4 * np.pi)

    def _mass2(self, members):
        if len(members) == 1:
            return 0.0
        total = self.momenta[members].sum(axis=0)
        return float(total[0] ** 2 - total[1:] @ total[1:])

    def split_cost(self, members, in_a):
        a, b = members[in_a], members[~in_a]
        log_psi = ginkgo_log_psi(
            self._mass2(members), self._mass2(a), self._mass2(b), self.lam, self.t_cut
        )
        return -float(log_psi)

    def lower(self, members):
        m = len(members)
        if m == 1:
            return 0.0
        if m == 2:
            return self.split_cost(members, np.array([True, False]))
        mass2 = self._mass2(members)
        if mass2 < self.t_cut:
            return np.inf
        return -(self._root(mass2) + (m - 2) * self.node_max)

    base = lower

    def increments(self, members, sides, position, side, pen_a, pen_b):
        """Nothing: the bound does not depend on the assignment."""


def search_bound(energy, X):
    """The admissible bound object of ``energy`` on data X, or a ValueError.

    Parameters
    ----------
    energy : HierarchicalEnergy
        :class:`~sktrellis.energies.Dasgupta`,
        :class:`~sktrellis.energies.CorrelationClustering` or
        :class:`~sktrellis.energies.GinkgoLikelihood`.
    X : ndarray
        Validated data the energy expects.

    Returns
    -------
    bound : DasguptaBound, CorrelationBound or GinkgoBound

    Examples
    --------
    >>> import numpy as np
    >>> from sktrellis.energies import Dasgupta
    >>> from sktrellis.energies._bounds import search_bound
    >>> W = np.array([[0, 1.0, 0.5], [1.0, 0, 2.0], [0.5, 2.0, 0]])
    >>> bound = search_bound(Dasgupta(affinity="precomputed"), W)
    >>> bound.lower(np.array([0, 1, 2]))  # exact for three points: 2*3.5 + 1.5
    8.5
    """
    if isinstance(energy, Dasgupta):
        return DasguptaBound(energy.similarities(X), energy.beta)
    if isinstance(energy, CorrelationClustering):
        return CorrelationBound(energy.weights(X), energy.beta)
    if isinstance(energy, GinkgoLikelihood):
        energy._validate_params()
        return GinkgoBound(energy.check_momenta(X), energy.lam, energy.t_cut)
    raise ValueError(
        f"best-first search has admissible bounds for Dasgupta, "
        f"CorrelationClustering and GinkgoLikelihood only, got energy={energy!r}; use "
        "ExactHierarchicalClustering (N <= 25) or SparseTrellisClustering"
    )

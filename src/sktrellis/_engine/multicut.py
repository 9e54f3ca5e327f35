"""Exact correlation clustering (max agreement) by an integer program with lazy triangles.

Maximise ``sum_{i<j} w_ij x_ij`` over x_ij in {0, 1} (1: i and j share a
cluster) subject to transitivity, ``x_ij + x_jk - x_ik <= 1`` for every
path i - j - k (Groetschel & Wakabayashi 1989). There are 3 C(N, 3) such
inequalities; they are added lazily, as the solutions violate them, and
each problem is solved by HiGHS through ``scipy.optimize.milp``: first LP
relaxations (cheap, and often integral on clustered data), then integer
programs. Every relaxation's optimum bounds the true maximum from above;
every solution is rounded to a partition (connected components, then
single-point moves), which bounds it from below.

Two exact reductions come first. Some optimal partition has no cluster
whose positive pairs fall apart (splitting it there loses no positive
weight and no longer pays the negative pairs across), so the connected
components of the positive pairs are solved one by one; and when the
pairs of positive weight are already transitive they are the answer.
"""
import time
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

# A triangle is violated by more than this (the solver's own feasibility
# tolerance is 1e-7; solutions are read on weights scaled to at most 1).
_VIOLATION_TOL = 1e-6
# Triangles added per round at most, per point of the component (the most
# violated first): enough to fix many violations at once, few enough to
# keep each integer program small.
_CUTS_PER_POINT = 8
# LP rounds before the integer programs start: the LP closes most of the
# bound cheaply; past this it seldom moves.
_MAX_LP_ROUNDS = 30


@dataclass
class MaxAgreement:
    """The result of :func:`max_agreement`.

    Attributes
    ----------
    labels : ndarray of shape (n_points,)
        The best partition found, labels by first appearance.
    objective : float
        ``sum w_ij`` over its pairs inside clusters.
    upper_bound : float
        An upper bound of the maximum (equal to ``objective`` when proven).
    proven : bool
        Whether ``labels`` is optimal (within HiGHS's tolerances).
    n_iter : int
        LP and integer programs solved.
    n_constraints : int
        Triangle inequalities added in all.
    stopped_by : str or None
        "max_time", "max_iter", or None when every component was solved.
    """

    labels: np.ndarray
    objective: float
    upper_bound: float
    proven: bool
    n_iter: int
    n_constraints: int
    stopped_by: object


def partition_objective(weights, labels):
    """Sum of ``weights[i, j]`` over the pairs i < j with the same label."""
    together = labels[:, None] == labels[None, :]
    return float(np.triu(np.where(together, weights, 0.0), 1).sum())


class GreedyAgglomeration(NamedTuple):
    """The result of :func:`greedy_agglomeration`.

    merges : ndarray of shape (N - 1, 2)
        The tree of the merges, children first (scipy's order: points are
        0..N-1 and merge k is node N + k).
    labels : ndarray of shape (N,)
        The greedy partition: the clusters left when the largest cross
        weight first stops being positive (a cut of the tree), labels by
        first appearance.
    """

    merges: np.ndarray
    labels: np.ndarray


def greedy_agglomeration(weights):
    """Merge the two clusters of largest cross weight until one cluster is left.

    The agglomerative heuristic of correlation clustering: while some cross
    weight is positive, merging the largest gains the most weight inside
    clusters; the partition where none is left is the greedy partition, and
    the merges carry on (least negative first) to a full tree whose cuts
    hold it. O(N**2) memory: the cross weights between the current clusters,
    kept in the row and column of each cluster's slot (a merged cluster takes
    the slot of its first child), and each slot's best partner. A merge
    updates one row and one column and rescores only the slots whose best
    partner it merged away, so a merge costs O(N) unless many slots must be
    rescored.

    Parameters
    ----------
    weights : ndarray of shape (N, N)
        Symmetric finite signed weights; the diagonal is ignored.

    Returns
    -------
    result : GreedyAgglomeration
    """
    n_points = len(weights)
    cross = weights.astype(np.float64, copy=True)
    np.fill_diagonal(cross, -np.inf)
    node = np.arange(n_points)           # tree node held by each slot
    owner = np.arange(n_points)          # slot of each point's cluster
    if n_points:
        best_slot = np.argmax(cross, axis=1)
        best_score = cross[np.arange(n_points), best_slot]
    labels = None
    merges = np.empty((max(n_points - 1, 0), 2), dtype=np.int64)
    for k in range(n_points - 1):
        first = int(np.argmax(best_score))
        second = int(best_slot[first])
        a, b = min(first, second), max(first, second)
        if labels is None and not best_score[first] > 0:
            labels = _first_appearance(owner)
        merges[k] = node[a], node[b]
        node[a] = n_points + k
        owner[owner == b] = a
        # b joins a: a's cross weights become the sums, b's row and column die.
        cross[a] += cross[b]
        cross[a, a] = cross[a, b] = -np.inf
        cross[b] = -np.inf
        cross[:, a] = cross[a]
        cross[:, b] = -np.inf
        best_score[b], best_slot[b] = -np.inf, -1   # -1: never stale again
        if k == n_points - 2:
            break
        # The other slots: the new cluster a may now be their best partner;
        # those whose best was a or b and are not beaten by a look again.
        row = cross[a]
        improved = row > best_score
        stale = np.flatnonzero(~improved & ((best_slot == a) | (best_slot == b)))
        best_score[improved] = row[improved]
        best_slot[improved] = a
        if stale.size:
            best_slot[stale] = np.argmax(cross[stale], axis=1)
            best_score[stale] = cross[stale, best_slot[stale]]
        best_slot[a] = int(np.argmax(row))
        best_score[a] = row[best_slot[a]]
    if labels is None:
        labels = np.zeros(n_points, dtype=np.int64)
    return GreedyAgglomeration(merges, labels)


def greedy_partition(weights):
    """The greedy partition of :func:`greedy_agglomeration` (labels by first appearance)."""
    return greedy_agglomeration(weights).labels


def improve_by_moves(weights, labels):
    """Move single points to the cluster (or a new one) that gains most, until none gains.

    Each move strictly increases the objective, so this ends.
    """
    labels = _first_appearance(labels)
    n_points = len(labels)
    n_labels = n_points + 1       # room for every point alone
    onehot = np.zeros((n_points, n_labels))
    onehot[np.arange(n_points), labels] = 1.0
    affinity = weights @ onehot   # weight of each point to each cluster
    sizes = np.bincount(labels, minlength=n_labels)
    tol = 1e-12 * max(1.0, float(np.abs(weights).max(initial=0.0)))
    points = np.arange(n_points)
    # Every move gains more than tol, so this ends; the cap only guards
    # against rounding in the incrementally updated affinities.
    for _ in range(10 * n_points * n_points):
        own = affinity[points, labels]
        # Joining a cluster of another label; an empty label means alone.
        gain = affinity - own[:, None]
        gain[points, labels] = 0.0
        empty = sizes == 0
        gain[:, empty] = -np.inf
        if empty.any():
            gain[:, np.argmax(empty)] = -own
        best = int(np.argmax(gain))
        i, target = divmod(best, n_labels)
        if not gain[i, target] > tol:
            break
        source = labels[i]
        affinity[:, source] -= weights[:, i]
        affinity[:, target] += weights[:, i]
        sizes[source] -= 1
        sizes[target] += 1
        labels[i] = target
    return _first_appearance(labels)


def _first_appearance(labels):
    _, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
    rank = np.empty(len(first), dtype=np.int64)
    rank[np.argsort(first)] = np.arange(len(first))
    return rank[inverse.ravel()]


class _Component:
    """The integer program of one connected component of the positive pairs."""

    def __init__(self, weights):
        self.weights = weights
        self.n_points = m = len(weights)
        self.rows, self.cols = np.triu_indices(m, 1)
        self.pair = np.full((m, m), -1, dtype=np.int64)
        self.pair[self.rows, self.cols] = np.arange(len(self.rows))
        self.pair[self.cols, self.rows] = np.arange(len(self.rows))
        # Scaled so that the solver's absolute tolerances are relative ones.
        self.scale = float(np.abs(weights).max(initial=0.0)) or 1.0
        self.cost = -weights[self.rows, self.cols] / self.scale
        self.cuts = np.zeros((0, 3), dtype=np.int64)   # pair ids (+1, +1, -1)
        self.seen = set()
        # x_ij = [w_ij > 0] solves the problem without triangles.
        self.upper_bound = float(np.clip(weights[self.rows, self.cols], 0, None).sum())
        self.labels = improve_by_moves(weights, greedy_partition(weights))
        self.objective = partition_objective(weights, self.labels)
        self.proven = False
        x = (weights[self.rows, self.cols] > 0).astype(np.float64)
        self._consider(x)
        if not len(self._violated(x)):
            self._prove(x)

    def _matrix(self, x):
        full = np.zeros((self.n_points, self.n_points))
        full[self.rows, self.cols] = x
        full[self.cols, self.rows] = x
        return full

    def _violated(self, x):
        """Triangles x_ij + x_jk - x_ik > 1 (path i - j - k), most violated first, capped."""
        full = self._matrix(x)
        m = self.n_points
        found, amount = [], []
        upper = np.triu(np.ones((m, m), dtype=bool), 1)
        for j in range(m):
            violation = full[j][:, None] + full[j][None, :] - full
            bad = upper & (violation > 1 + _VIOLATION_TOL)
            bad[j, :] = False
            bad[:, j] = False
            i, k = np.nonzero(bad)
            if len(i):
                found.append(np.column_stack([self.pair[i, j], self.pair[j, k], self.pair[i, k]]))
                amount.append(violation[i, k])
        if not found:
            return np.zeros((0, 3), dtype=np.int64)
        found, amount = np.concatenate(found), np.concatenate(amount)
        order = np.argsort(-amount, kind="stable")
        return found[order]

    def add_cuts(self, cuts):
        """Add the new ones of ``cuts`` (at most the per-round cap); returns how many."""
        limit = _CUTS_PER_POINT * self.n_points
        new = []
        # Cuts already added hold (up to tolerance): nearly all found are new.
        for cut in cuts[: 4 * limit].tolist():
            key = (min(cut[0], cut[1]), max(cut[0], cut[1]), cut[2])
            if key not in self.seen:
                self.seen.add(key)
                new.append(cut)
                if len(new) >= limit:
                    break
        if new:
            self.cuts = np.concatenate([self.cuts, np.array(new, dtype=np.int64)])
        return len(new)

    def solve(self, integral, time_limit):
        """One LP or integer program with the triangles so far; True if a cut was added."""
        n_pairs, n_cuts = len(self.cost), len(self.cuts)
        matrix = csr_matrix(
            (np.tile([1.0, 1.0, -1.0], n_cuts), (np.repeat(np.arange(n_cuts), 3), self.cuts.ravel())),
            shape=(n_cuts, n_pairs),
        )
        options = {"time_limit": max(time_limit, 1e-3), "disp": False}
        if integral:
            options["mip_rel_gap"] = 0.0
        result = milp(
            self.cost, integrality=np.full(n_pairs, int(integral)), bounds=Bounds(0.0, 1.0),
            constraints=[LinearConstraint(matrix, -np.inf, 1.0)] if n_cuts else None,
            options=options,
        )
        bound = None
        if integral and getattr(result, "mip_dual_bound", None) is not None \
                and np.isfinite(result.mip_dual_bound):
            bound = -result.mip_dual_bound * self.scale
        elif result.status == 0:
            bound = -result.fun * self.scale
        if bound is not None:
            self.upper_bound = min(self.upper_bound, bound)
        if result.x is None:
            return False
        x = np.clip(result.x, 0.0, 1.0)
        self._consider(x)
        if result.status != 0:
            # Stopped by its time limit: the budget is spent, no round follows.
            return False
        violated = self._violated(np.round(x) if integral else x)
        if not len(violated):
            if integral or np.all(np.abs(x - np.round(x)) < _VIOLATION_TOL):
                self._prove(np.round(x))
            return False
        return self.add_cuts(violated) > 0

    def _consider(self, x):
        """Round a solution to a partition; keep it if it beats the incumbent."""
        together = self._matrix(x) > 0.5
        _, labels = connected_components(csr_matrix(together), directed=False)
        labels = improve_by_moves(self.weights, labels)
        objective = partition_objective(self.weights, labels)
        if objective > self.objective:
            self.labels, self.objective = labels, objective

    def _prove(self, x):
        """A transitive optimum of a relaxation: it is the optimum."""
        _, labels = connected_components(csr_matrix(self._matrix(x) > 0.5), directed=False)
        objective = partition_objective(self.weights, labels)
        if objective >= self.objective:
            self.labels, self.objective = _first_appearance(labels), objective
        self.upper_bound = self.objective
        self.proven = True


def max_agreement(weights, max_time=None, max_iter=None):
    """The partition maximising ``sum w_ij`` over pairs inside clusters, with a bound.

    Parameters
    ----------
    weights : ndarray of shape (n_points, n_points)
        Symmetric, finite, zero diagonal.
    max_time : float, default=None
        Seconds; past them the best partition found is returned with its
        bound. None: no limit.
    max_iter : int, default=None
        LP and integer programs to solve at most; None: no limit.

    Returns
    -------
    result : MaxAgreement
    """
    start = time.perf_counter()
    deadline = None if max_time is None else start + max_time
    n_points = len(weights)
    labels = np.zeros(n_points, dtype=np.int64)
    n_parts, part = connected_components(csr_matrix(weights > 0), directed=False)
    members = [np.flatnonzero(part == p) for p in range(n_parts)]
    # Small components first: each proven one is final whatever happens later.
    members.sort(key=len)
    components = [_Component(weights[np.ix_(m, m)]) for m in members]
    n_iter, stopped_by = 0, None
    for component in components:
        lp_rounds = 0
        while not component.proven and stopped_by is None:
            remaining = None if deadline is None else deadline - time.perf_counter()
            if remaining is not None and remaining <= 0:
                stopped_by = "max_time"
            elif max_iter is not None and n_iter >= max_iter:
                stopped_by = "max_iter"
            if stopped_by is not None:
                break
            integral = lp_rounds >= _MAX_LP_ROUNDS
            added = component.solve(integral, np.inf if remaining is None else remaining)
            n_iter += 1
            if not integral:
                lp_rounds += 1
                if not added:
                    # The LP holds every triangle (or its time ran out): integers next.
                    lp_rounds = _MAX_LP_ROUNDS
            elif not added and not component.proven:
                # The integer program stopped at its time limit (a solved one
                # is either transitive, hence proven, or has triangles to add).
                stopped_by = "max_time"
    offset = 0
    for m, component in zip(members, components):
        labels[m] = component.labels + offset
        offset += component.labels.max() + 1
    labels = _first_appearance(labels)
    proven = all(c.proven for c in components)
    objective = partition_objective(weights, labels)
    upper_bound = sum(c.upper_bound for c in components)
    return MaxAgreement(
        labels, objective, objective if proven else max(upper_bound, objective), proven,
        n_iter, sum(len(c.cuts) for c in components), stopped_by,
    )

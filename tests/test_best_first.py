"""Best-first search against the exact trellis and brute-force enumeration."""
import _thread
import functools
import os
import subprocess
import sys
import threading
import warnings

import numpy as np
import pytest
from scipy.cluster.hierarchy import is_valid_linkage
from sklearn.datasets import make_blobs

from sktrellis import BestFirstHierarchicalClustering, ExactHierarchicalClustering
from sktrellis.datasets import make_jets
from sktrellis._engine.tree.conversion import masks_from_merges, merges_from_tree
from sktrellis.energies import CorrelationClustering, Dasgupta, GinkgoLikelihood, SplitEnergy
from sktrellis.metrics import dasgupta_cost
from sktrellis._engine.search import driver
from sktrellis._engine.search._best_first import BestFirstSearch, SplitGenerator

from .common import brute_force

KINDS = ["dasgupta", "hcc", "ginkgo"]


def _problem(kind, n_points, rng):
    """(energy, X) with random data of each energy kind; X is precomputed for HCC."""
    if kind == "dasgupta":
        return Dasgupta(beta=rng.uniform(0.5, 3)), rng.normal(size=(n_points, 2))
    if kind == "ginkgo":
        jet = make_jets(n_leaves=n_points, random_state=int(rng.integers(2**31)))[0]
        return GinkgoLikelihood(), jet.momenta
    weights = rng.normal(size=(n_points, n_points))
    return CorrelationClustering(affinity="precomputed", beta=1.5), weights + weights.T


def _members(mask, n_points):
    return np.array([i for i in range(n_points) if mask >> i & 1], dtype=np.intp)


def _search(energy, X):
    """Run the search to the end, with no incumbent."""
    search = BestFirstSearch(energy.search_bound(X), len(X))
    assert search.run() == "optimal"
    return search


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("n_points", [4, 7, 10, 12])
def test_bound_is_admissible_on_every_subset(kind, n_points, global_random_seed):
    """lower(S) <= cost of the best tree over S, for all 2**N - 1 subsets."""
    rng = np.random.default_rng(global_random_seed)
    energy, X = _problem(kind, n_points, rng)
    trellis = ExactHierarchicalClustering(energy).fit(X)._trellis
    bound = energy.search_bound(X)
    for mask in range(1, 1 << n_points):
        best_cost = -trellis.log_map[mask]
        lower = bound.lower(_members(mask, n_points))
        assert lower <= best_cost + 1e-9 * max(1.0, abs(best_cost)), mask
        if kind == "dasgupta" and mask.bit_count() <= 3:
            # The triplet bound is exact up to three points.
            assert lower == pytest.approx(best_cost, rel=1e-12, abs=1e-12)


def _assert_admissible_everywhere(energy, X):
    n_points = len(X)
    trellis = ExactHierarchicalClustering(energy).fit(X)._trellis
    bound = energy.search_bound(X)
    for mask in range(1, 1 << n_points):
        best_cost = -trellis.log_map[mask]
        lower = bound.lower(_members(mask, n_points))
        assert lower <= best_cost + 1e-9 * max(1.0, abs(best_cost)), mask


@pytest.mark.parametrize("lam, t_cut", [(0.5, 16.0), (0.9, 4.0), (1.0, 16.0), (3.0, 16.0),
                                        (1.5, 2.0), (1.5, 40.0), (6.0, 1.0)])
def test_ginkgo_bound_is_admissible_for_any_parameters(lam, t_cut, global_random_seed):
    """The Ginkgo bound on every subset for lam below and above 1 and other cuts."""
    jet = make_jets(n_leaves=9, random_state=global_random_seed)[0]
    _assert_admissible_everywhere(GinkgoLikelihood(lam=lam, t_cut=t_cut), jet.momenta)


@pytest.mark.parametrize("boost", [0.0, 15.0])
@pytest.mark.parametrize("deficit", [0.0, 5e-10])
def test_ginkgo_bound_is_admissible_off_the_shower(boost, deficit, global_random_seed):
    """Massless momenta in random directions (not a shower), collimated or not, and with
    E a rounding below |p| (slightly negative t_i and t_ij, as validation allows)."""
    rng = np.random.default_rng(global_random_seed)
    p = rng.normal(size=(9, 3)) * rng.uniform(1, 20, size=(9, 1)) + [0.0, 0.0, boost]
    X = np.column_stack([np.linalg.norm(p, axis=1) * (1 - deficit), p])
    _assert_admissible_everywhere(GinkgoLikelihood(), X)


def _pair_masses(momenta):
    """t of every pair of particles, as the likelihood sums them."""
    energy = momenta[:, 0, None] + momenta[None, :, 0]
    p = momenta[:, None, 1:] + momenta[None, :, 1:]
    return energy ** 2 - np.sum(p ** 2, axis=2)


def _pairs_of(momenta, members):
    return _pair_masses(momenta[members])[np.triu_indices(len(members), 1)]


@pytest.mark.parametrize("quantile", [0.1, 0.4, 0.7])
def test_ginkgo_bound_with_the_cut_among_the_pair_masses(quantile, global_random_seed):
    """With t_cut between the jet's pair masses, most pairs and triples cannot be nodes:
    the bound (its least masses of pairs and triples that can be) and log_z_upper hold on
    every subset, and a subset without a pair above the cut has no tree."""
    momenta = make_jets(n_leaves=9, random_state=global_random_seed)[0].momenta
    pairs = _pair_masses(momenta)[np.triu_indices(9, 1)]
    energy = GinkgoLikelihood(t_cut=float(np.quantile(pairs, quantile)))
    trellis = ExactHierarchicalClustering(energy).fit(momenta)._trellis
    bound = energy.search_bound(momenta)
    for mask in range(1, 1 << 9):
        members = _members(mask, 9)
        best_cost, log_z = -trellis.log_map[mask], trellis.log_z[mask]
        lower, upper = bound.lower(members), bound.log_z_upper(members)
        assert lower <= best_cost + 1e-9 * max(1.0, abs(best_cost)), mask
        assert log_z == -np.inf or log_z <= upper + 1e-9 * max(1.0, abs(log_z)), mask
        if len(members) >= 2 and np.all(_pairs_of(momenta, members) < energy.t_cut):
            assert lower == np.inf and upper == -np.inf and trellis.log_map[mask] == -np.inf


@pytest.mark.parametrize("direction", [-1, 0, 1])
def test_ginkgo_bound_with_a_pair_on_the_cut(direction, global_random_seed):
    """A pair whose t is the cut to rounding (a hair above, equal, a hair below): the
    bound's own sums of t must not exclude a node the likelihood allows."""
    rng = np.random.default_rng(global_random_seed)
    momenta = make_jets(n_leaves=8, random_state=global_random_seed)[0].momenta
    i, j = rng.choice(8, 2, replace=False)
    t_pair = _pair_masses(momenta)[i, j]
    t_cut = float(np.nextafter(t_pair, t_pair + direction)) if direction else float(t_pair)
    energy = GinkgoLikelihood(t_cut=t_cut)
    trellis = ExactHierarchicalClustering(energy).fit(momenta)._trellis
    bound = energy.search_bound(momenta)
    for mask in range(1, 1 << 8):
        members = _members(mask, 8)
        best_cost, log_z = -trellis.log_map[mask], trellis.log_z[mask]
        assert bound.lower(members) <= best_cost + 1e-9 * max(1.0, abs(best_cost)), mask
        assert (log_z == -np.inf
                or log_z <= bound.log_z_upper(members) + 1e-9 * max(1.0, abs(log_z))), mask


def test_ginkgo_bound_remembers_what_it_computed(global_random_seed):
    """The bound's table of clusters answers what a fresh bound computes, in any order of
    the members and however often it is asked (the table grows from 4096 slots)."""
    rng = np.random.default_rng(global_random_seed)
    energy, X = _problem("ginkgo", 12, rng)
    bound = energy.search_bound(X)
    masks = rng.permutation(np.arange(1, 1 << 12))
    for mask in masks:
        bound.lower(rng.permutation(_members(int(mask), 12)))
    for mask in masks[:300]:
        members = _members(int(mask), 12)
        fresh = energy.search_bound(X).lower(members)
        assert bound.lower(rng.permutation(members)) == pytest.approx(fresh, rel=1e-12, abs=1e-12)


def test_ginkgo_bound_is_within_a_few_nats(global_random_seed):
    """A 10-particle jet's bound is within 8 nats of its MAP cost (1.7 to 6.3 over
    seeds 0-99; 2.7 to 8.7 before the lightest nodes of 2-4 points under the cut, about
    30 for G(t_S) + (|S| - 2) G_max, the bound before the size DP)."""
    rng = np.random.default_rng(global_random_seed)
    energy, X = _problem("ginkgo", 10, rng)
    best_cost = -ExactHierarchicalClustering(energy).fit(X).map_log_potential_
    lower = energy.search_bound(X).lower(np.arange(10))
    assert best_cost - 8.0 < lower <= best_cost + 1e-9 * best_cost


def _published_jets():
    import json
    from pathlib import Path

    # ../shared/data beside the repository, from a checkout or a worktree
    # one directory deeper.
    candidates = [parent / "shared" / "data" / "ginkgo_published_jets.json"
                  for parent in Path(__file__).resolve().parents[1:4]]
    path = next((path for path in candidates if path.exists()), None)
    if path is None:
        pytest.skip(f"published jets not found at {candidates[1]}")
    return json.loads(path.read_text())["cases"]


def test_ginkgo_bound_is_admissible_on_published_jets():
    """lower(S) <= best cost over S on every subset of the 60 AISTATS 2021 jets (N <= 9),
    and the whole jet's bound is finite and at most its published MAP cost."""
    for case in _published_jets():
        momenta = np.array(case["leaves_4momenta"])
        n_points = len(momenta)
        energy = GinkgoLikelihood(lam=case["params"]["lambda"], t_cut=case["params"]["t_cut"])
        trellis = ExactHierarchicalClustering(energy).fit(momenta)._trellis
        bound = energy.search_bound(momenta)
        for mask in range(1, 1 << n_points):
            best_cost = -trellis.log_map[mask]
            lower = bound.lower(_members(mask, n_points))
            assert lower <= best_cost + 1e-9 * max(1.0, abs(best_cost)), (case["jet_index"], mask)
        whole = bound.lower(np.arange(n_points))
        assert np.isfinite(whole)
        assert whole <= -case["map_loglik"] + 1e-9 * abs(case["map_loglik"])


@pytest.mark.parametrize("kind", KINDS)
def test_split_cost_is_minus_log_psi(kind, global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    energy, X = _problem(kind, 6, rng)
    potential = energy.split_potential(X)
    bound = energy.search_bound(X)
    for parent in (0b111111, 0b101101, 0b000111):
        members = _members(parent, 6)
        for left in range(1, parent):
            if left & parent != left or not left & 1 << int(members[0]):
                continue
            in_a = np.array([left >> int(i) & 1 for i in members], dtype=bool)
            expected = -potential.evaluate([parent], [left])[0]
            assert bound.split_cost(members, in_a) == pytest.approx(expected, rel=1e-12)


def _separated_triple_penalty(w, members, in_a):
    """Sum over the triples the split separates of (max weight - weight kept together)."""
    total = 0.0
    m = len(members)
    for x in range(m):
        for y in range(x + 1, m):
            for z in range(y + 1, m):
                trio = (x, y, z)
                sides = [in_a[t] for t in trio]
                if len(set(sides)) == 1:
                    continue
                pairs = [(x, y), (x, z), (y, z)]
                weights = [w[members[s], members[t]] for s, t in pairs]
                kept = next(k for k, (s, t) in enumerate(pairs) if in_a[s] == in_a[t])
                total += max(weights) - weights[kept]
    return total


def test_dasgupta_split_bound_is_the_separated_triples(global_random_seed):
    """split_cost + lower(A) + lower(B) = lower(S) + beta * separated-triple penalty,
    and the kernel's increments sum to that penalty along any assignment."""
    rng = np.random.default_rng(global_random_seed)
    energy, X = _problem("dasgupta", 8, rng)
    bound = energy.set_params(tree_prior="uniform").search_bound(X)
    members = np.sort(rng.choice(8, size=7, replace=False))
    for _ in range(5):
        in_a = rng.random(7) < 0.5
        in_a[0] = True
        in_a[-1] = False
        penalty = _separated_triple_penalty(bound.w, members, in_a)
        value = (bound.split_cost(members, in_a) + bound.lower(members[in_a])
                 + bound.lower(members[~in_a]))
        assert value == pytest.approx(bound.lower(members) + energy.beta * penalty, rel=1e-12)
        # Assign in order: each point pays its pen_X at its turn.
        sides = (~in_a).astype(np.int8)
        pen_a, pen_b = np.zeros(7), np.zeros(7)
        paid = 0.0
        for position in range(7):
            paid += (pen_a if sides[position] == 0 else pen_b)[position]
            bound.increments(members, sides, position, sides[position], pen_a, pen_b)
        assert paid == pytest.approx(penalty, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("size", [3, 5, 8])
def test_generator_yields_every_split_once_above_its_key(kind, size, global_random_seed):
    """Each feasible split exactly once; the next key never exceeds a split still to come."""
    rng = np.random.default_rng(global_random_seed)
    energy, X = _problem(kind, 9, rng)
    bound = energy.search_bound(X)
    members = np.sort(rng.choice(9, size=size, replace=False))
    generator = SplitGenerator(bound, members)
    seen, keys, values = set(), [], []
    while True:
        key = generator.next_key
        in_a = generator.pop_split()
        if in_a is None:
            assert not generator.n_open, "fewer than 4096 states between two splits here"
            break
        assert in_a[0] and not in_a.all()
        seen.add(tuple(in_a))
        a, b = members[in_a], members[~in_a]
        keys.append(key)
        values.append(bound.split_cost(members, in_a) + bound.lower(a) + bound.lower(b))
    # Every split of finite bound (Ginkgo forbids some), by enumeration.
    feasible = 0
    for code in range(1, 2 ** (size - 1)):
        in_a = np.array([True] + [not code >> k & 1 for k in range(size - 1)])
        a, b = members[in_a], members[~in_a]
        feasible += np.isfinite(bound.split_cost(members, in_a) + bound.lower(a) + bound.lower(b))
    assert len(seen) == len(keys) == feasible
    values = np.array(values)
    for k, key in enumerate(keys):
        # Admissible for the split popped and every later one.
        assert key <= values[k:].min() + 1e-9 * max(1.0, abs(key))
    if kind == "dasgupta":
        # The Dasgupta key of a complete split is its bound: bound order.
        assert np.all(np.diff(values) >= -1e-9 * values.max())


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("n_points", [2, 3, 5, 8, 11, 13])
def test_search_finds_the_trellis_map(kind, n_points, global_random_seed):
    """Proven optimal and equal to the exact trellis, from no incumbent.

    (Ginkgo: up to 12 points the bound's exact solve answers at the root; 13
    points are searched.)
    """
    rng = np.random.default_rng(global_random_seed + n_points)
    energy, X = _problem(kind, n_points, rng)
    exact = ExactHierarchicalClustering(energy).fit(X).map_log_potential_
    search = _search(energy, X)
    assert -search.upper == pytest.approx(exact, rel=1e-9, abs=1e-9)
    assert search.gap == 0.0
    merges, log_potentials = search.merges()
    assert log_potentials.sum() == pytest.approx(exact, rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("n_points", [2, 5, 13])
@pytest.mark.parametrize("incumbent", ["sparse", pytest.param("beam", marks=pytest.mark.slow)])
@pytest.mark.parametrize("algorithm", ["search", "auto"])
def test_estimator_finds_the_trellis_map(kind, n_points, incumbent, algorithm,
                                         global_random_seed):
    """The estimator, from either incumbent, by either solver: proven optimal, never below it."""
    rng = np.random.default_rng(global_random_seed + n_points)
    energy, X = _problem(kind, n_points, rng)
    exact = ExactHierarchicalClustering(energy).fit(X).map_log_potential_
    model = BestFirstHierarchicalClustering(energy, incumbent=incumbent,
                                            algorithm=algorithm).fit(X)
    assert model.stop_reason_ == "optimal"
    assert model.solver_ in (["search"] if algorithm == "search" else ["search", "trellis"])
    assert model.optimality_gap_ == 0.0
    assert model.map_log_potential_ == pytest.approx(exact, rel=1e-9, abs=1e-9)
    assert model.map_log_potential_ >= model.incumbent_log_potential_ - 1e-9
    assert is_valid_linkage(model.linkage_matrix_)


@pytest.mark.parametrize("kind", KINDS)
def test_seeded_with_the_optimal_tree(kind, global_random_seed):
    """Seeded with the exact MAP tree, the search proves it without generating it again."""
    rng = np.random.default_rng(global_random_seed)
    energy, X = _problem(kind, 13, rng)
    exact = ExactHierarchicalClustering(energy).fit(X)
    masks = masks_from_merges(merges_from_tree(exact.linkage_matrix_, 13), 13)
    tree_splits = {frozenset((masks[a], masks[b])) for a, b in
                   merges_from_tree(exact.linkage_matrix_, 13)}
    search = BestFirstSearch(energy.search_bound(X), 13)
    search.add_tree(merges_from_tree(exact.linkage_matrix_, 13))
    assert -search.upper == pytest.approx(exact.map_log_potential_, rel=1e-9, abs=1e-9)
    assert search.run() == "optimal"
    assert -search.upper == pytest.approx(exact.map_log_potential_, rel=1e-9, abs=1e-9)
    # Its own tree, split for split, or one of the same potential.
    merges, log_potentials = search.merges()
    assert log_potentials.sum() == pytest.approx(exact.map_log_potential_, rel=1e-9, abs=1e-9)
    assert len(tree_splits) == 12


@pytest.mark.parametrize("kind", KINDS)
def test_search_matches_brute_force(kind, global_random_seed):
    """Against every one of the 945 trees over 6 points."""
    rng = np.random.default_rng(global_random_seed)
    energy, X = _problem(kind, 6, rng)
    _, best, _, _ = brute_force(energy.split_potential(X), 6)
    search = _search(energy, X)
    assert -search.upper == pytest.approx(best, rel=1e-9, abs=1e-9)
    # The tree it returns has the potential it claims.
    merges, log_potentials = search.merges()
    assert merges.shape == (5, 2)
    assert log_potentials.sum() == pytest.approx(best, rel=1e-9, abs=1e-9)


def test_structured_data_past_the_trellis():
    """N = 30 blobs: proven optimal, never worse than the beam-search incumbent."""
    X, _ = make_blobs(n_samples=30, centers=3, random_state=0)
    model = BestFirstHierarchicalClustering(n_clusters=3).fit(X)
    assert model.stop_reason_ == "optimal"
    assert model.optimality_gap_ == 0.0
    assert model.log_potential_upper_bound_ == pytest.approx(model.map_log_potential_)
    assert model.map_log_potential_ >= model.incumbent_log_potential_
    assert model.n_clusters_stored_ < 10_000


@pytest.mark.parametrize("tree_prior", ["uniform", "yule"])
def test_the_returned_tree_has_the_claimed_cost_at_64_points(tree_prior):
    """N = 64 blobs, the most the search takes: the tree's Dasgupta cost (and prior), recomputed."""
    X, _ = make_blobs(n_samples=64, centers=4, random_state=1)
    energy = Dasgupta(beta=0.5, tree_prior=tree_prior)
    model = BestFirstHierarchicalClustering(energy, n_clusters=4).fit(X)
    assert model.stop_reason_ == "optimal"
    cost = dasgupta_cost(model.linkage_matrix_, energy.similarities(X))
    sizes = model.linkage_matrix_[:, 3]
    log_prior = -np.log(sizes - 1).sum() if tree_prior == "yule" else 0.0
    assert -energy.beta * cost + log_prior == pytest.approx(model.map_log_potential_, rel=1e-12)


@pytest.mark.parametrize("prior_cost", [[0.0, -1.0], [0.0, np.nan], [[0.0]]])
def test_the_tree_prior_bound_refuses_bad_costs(prior_cost):
    from sktrellis._engine.search._prior_bound import SizePriorBound

    inner = Dasgupta(tree_prior="uniform").search_bound(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="prior_cost must be a 1-d array of non-negative"):
        SizePriorBound(inner, prior_cost)


@pytest.mark.parametrize("kind", ["dasgupta", "hcc"])
def test_the_tree_prior_bound_is_admissible_and_exact_on_splits(kind, global_random_seed):
    """SizePriorBound: split costs with the prior, lower bounds below every subset's best tree."""
    rng = np.random.default_rng(global_random_seed)
    energy, X = _problem(kind, 8, rng)
    bound = energy.set_params(tree_prior="yule").search_bound(X)
    inner = energy.set_params(tree_prior="uniform").search_bound(X)
    # The least prior cost of a tree over n points, by brute force over shapes.
    least = {1: 0.0}
    for n in range(2, 9):
        least[n] = np.log(n - 1) + min(least[k] + least[n - k] for k in range(1, n))
    np.testing.assert_allclose(bound.least_tree_cost[1:], [least[n] for n in range(1, 9)])
    trellis = ExactHierarchicalClustering(energy.set_params(tree_prior="yule")).fit(X)._trellis
    for mask in range(1, 1 << 8):
        members = _members(mask, 8)
        if len(members) < 2:
            continue
        in_a = rng.random(len(members)) < 0.5
        in_a[0], in_a[-1] = True, False
        assert bound.split_cost(members, in_a) == pytest.approx(
            inner.split_cost(members, in_a) + np.log(len(members) - 1), rel=1e-12, abs=1e-12)
        best = -trellis.log_map[mask]
        assert bound.lower(members) <= best + 1e-9 * max(1.0, abs(best))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("max_states", [1, 100, 1000, 10_000])
def test_budget_stop_reports_a_valid_gap(kind, max_states, global_random_seed):
    """Stopped at any point: the exact MAP lies between the tree found and the bound."""
    rng = np.random.default_rng(global_random_seed)
    # Above the Ginkgo bound's exact size, so that the root is searched.
    energy, X = _problem(kind, 13, rng)
    exact = ExactHierarchicalClustering(energy).fit(X).map_log_potential_
    model = BestFirstHierarchicalClustering(
        energy, max_states=max_states, incumbent="beam", beam_width=1, algorithm="search")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(X)
    if model.stop_reason_ == "optimal":
        assert not caught
        assert model.optimality_gap_ == 0.0
    else:
        assert model.stop_reason_ == "max_states"
        assert any("stopped (max_states) before proving" in str(w.message) for w in caught)
    assert max_states > 1 or model.stop_reason_ == "max_states"
    tol = 1e-9 * abs(exact)
    assert model.map_log_potential_ <= exact + tol
    assert exact <= model.log_potential_upper_bound_ + tol
    assert model.optimality_gap_ == pytest.approx(
        model.log_potential_upper_bound_ - model.map_log_potential_, abs=tol
    )
    assert is_valid_linkage(model.linkage_matrix_)


def test_no_tree_found_yet_is_an_error_not_a_crash():
    energy, X = _problem("dasgupta", 20, np.random.default_rng(0))
    with pytest.raises(ValueError, match="no tree of non-zero potential yet"):
        BestFirstSearch(energy.search_bound(X), 20).merges()


def test_max_time_stops_the_search():
    X = np.random.default_rng(0).normal(size=(40, 2))
    model = BestFirstHierarchicalClustering(max_time=1e-6)
    with pytest.warns(UserWarning, match=r"stopped \(max_time\)"):
        model.fit(X)
    assert model.stop_reason_ == "max_time"
    assert model.optimality_gap_ >= 0.0
    assert model.linkage_matrix_.shape == (39, 4)


def test_ctrl_c_returns_the_best_tree_with_its_gap(monkeypatch, ctrl_c):
    """A real SIGINT during the kernel: the fit returns its best tree and gap."""
    calls = []

    class Interrupted(BestFirstSearch):
        def run(self, *args, **kwargs):
            if not calls:
                # Raised in the main thread once the kernel's slice returns.
                threading.Timer(0.05, _thread.interrupt_main).start()
            calls.append(1)
            return super().run(*args, **kwargs)

    monkeypatch.setattr(driver, "BestFirstSearch", Interrupted)
    # Random points: far from proven within max_time, so only Ctrl-C ends it.
    X = np.random.default_rng(0).normal(size=(40, 2))
    with pytest.warns(UserWarning, match=r"stopped \(interrupted\)"):
        model = BestFirstHierarchicalClustering(max_time=600).fit(X)
    assert calls
    assert model.stop_reason_ == "interrupted"
    tol = 1e-9 * abs(model.incumbent_log_potential_)
    assert model.map_log_potential_ >= model.incumbent_log_potential_ - tol
    assert model.optimality_gap_ > 0.0


def test_more_than_64_points_is_refused_before_any_work():
    X = np.random.default_rng(0).normal(size=(65, 2))
    with pytest.raises(ValueError, match="n_samples=65 is more than 64; use SparseTrellisClustering"):
        BestFirstHierarchicalClustering().fit(X)


def test_verbose_reports_bounds(capsys):
    X, _ = make_blobs(n_samples=12, centers=2, random_state=0)
    BestFirstHierarchicalClustering(verbose=1, algorithm="search").fit(X)
    out = capsys.readouterr().out
    assert "[BestFirstHierarchicalClustering]" in out
    assert "gap 0," in out
    # The generators' work, which moves while a large cluster's splits are
    # evaluated and the other counts stand still.
    assert " split bounds (" in out and " of the root's 2047): " in out


@pytest.mark.parametrize(
    "params, X, match",
    [
        ({"energy": SplitEnergy(lambda X, a, b: np.zeros(len(a)))}, np.zeros((4, 1)),
         "SplitEnergy does not provide \\(Dasgupta, CorrelationClustering and GinkgoLikelihood do\\)"),
        ({"n_clusters": 5}, np.arange(8.0).reshape(4, 2),
         "n_clusters=5 must be at most n_samples=4"),
        # Collinear massless particles: every cluster is below t_cut.
        ({"energy": GinkgoLikelihood(), "incumbent": "beam"},
         np.array([[1.0, 1, 0, 0], [2, 2, 0, 0], [3, 3, 0, 0]]),
         "every tree of these n_samples=3 points has zero potential"),
        ({"incumbent": "best"}, np.arange(8.0).reshape(4, 2), "incumbent"),
        ({"max_states": 0}, np.arange(8.0).reshape(4, 2), "max_states"),
        ({"max_time": -1.0}, np.arange(8.0).reshape(4, 2), "max_time"),
    ],
)
def test_errors(params, X, match):
    with pytest.raises(ValueError, match=match):
        BestFirstHierarchicalClustering(**params).fit(X)


@pytest.mark.filterwarnings("ignore:BestFirstHierarchicalClustering stopped")
def test_restored_common_checks(global_random_seed):
    """What the refused common checks verify, on 64 points."""
    from sklearn.base import clone
    from sklearn.exceptions import NotFittedError
    from sklearn.utils.validation import check_is_fitted

    X = np.random.default_rng(global_random_seed).normal(size=(64, 3))
    model = BestFirstHierarchicalClustering(max_time=0.2, incumbent="beam")
    with pytest.raises(NotFittedError):
        check_is_fitted(model)
    model.fit(X)
    check_is_fitted(model)
    # check_n_features_in
    assert model.n_features_in_ == 3
    # check_fit_idempotent (the incumbent fixes the tree when the budget is tiny)
    again = clone(model).set_params(max_states=1).fit(X)
    np.testing.assert_array_equal(
        again.labels_, clone(model).set_params(max_states=1).fit(X).labels_)
    # check_positive_only_tag_during_fit: negative features are fine.
    clone(model).fit(X - 100.0)


@pytest.mark.parametrize("n_points", [13, pytest.param(14, marks=pytest.mark.slow)])
def test_ginkgo_past_the_exact_clusters(n_points, global_random_seed):
    """Clusters above the bound's exact size are searched: still the trellis MAP."""
    rng = np.random.default_rng(global_random_seed)
    energy, X = _problem("ginkgo", n_points, rng)
    exact = ExactHierarchicalClustering(energy).fit(X).map_log_potential_
    bound = energy.search_bound(X)
    assert bound.exact_size < n_points
    search = _search(energy, X)
    assert -search.upper == pytest.approx(exact, rel=1e-9, abs=1e-9)
    merges, log_potentials = search.merges()
    assert log_potentials.sum() == pytest.approx(exact, rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("n_points", [0, 65])
def test_kernel_refuses_sizes_its_masks_cannot_hold(n_points):
    bound = Dasgupta(affinity="precomputed").search_bound(np.zeros((2, 2)))
    with pytest.raises(ValueError, match=f"n_points must be 1 to 64, got {n_points}"):
        BestFirstSearch(bound, n_points)


@pytest.mark.parametrize("exact_size", [-1, 21])
def test_ginkgo_exact_size_is_bounded(exact_size):
    from sktrellis._engine.search._ginkgo_bound import GinkgoBound

    momenta = make_jets(n_leaves=4, random_state=0)[0].momenta
    with pytest.raises(ValueError, match=f"exact_size must be 0 to 20 .* got {exact_size}"):
        GinkgoBound(momenta, 1.5, 16.0, exact_size=exact_size)


def _search_both_ways(energy, X, **options):
    """The search run to its end with exact solves by the bound's subset tables, and without."""
    from sktrellis._engine.search import _graph

    searches = []
    for tables in (True, False):
        previous = _graph.use_subset_solver(tables)
        try:
            search = BestFirstSearch(energy.search_bound(X), len(X), **options)
            assert search.run() == "optimal"
        finally:
            _graph.use_subset_solver(previous)
        searches.append(search)
    return searches


def _ginkgo_cases(case, n_points, seed):
    """A jet, a jet whose cut lies among its pair masses, or one whose cut exceeds its mass."""
    X = make_jets(n_leaves=n_points, random_state=seed)[0].momenta
    if case == "jet":
        return GinkgoLikelihood(), X
    pairs = _pair_masses(X)[np.triu_indices(n_points, 1)]
    if case == "cut among the pairs":
        return GinkgoLikelihood(t_cut=float(np.quantile(pairs, 0.4))), X
    total = X.sum(axis=0)
    return GinkgoLikelihood(t_cut=2.0 * (total[0] ** 2 - total[1:] @ total[1:])), X


@pytest.mark.parametrize("case", ["jet", "cut among the pairs", "jet below the cut"])
@pytest.mark.parametrize("n_points, exact_size", [(6, -1), (9, 5), (13, -1),
                                                  pytest.param(15, -1, marks=pytest.mark.slow)])
def test_ginkgo_exact_solves_by_the_kernel_are_the_recursion(case, n_points, exact_size,
                                                             global_random_seed):
    """Exact solves through the trellis's Ginkgo kernel leave the search as the recursion
    over split_cost leaves it: the same best tree and cost bit for bit, the same clusters,
    splits, states and walks, log Z and cluster probabilities within 1e-12."""
    energy, X = _ginkgo_cases(case, n_points, global_random_seed)
    tables, recursion = _search_both_ways(energy, X, exact_size=exact_size)
    assert tables.upper == recursion.upper
    assert tables.lower == recursion.lower
    for name in ["n_clusters", "n_splits", "n_states", "n_expanded", "n_iterations"]:
        assert getattr(tables, name) == getattr(recursion, name), name
    if np.isfinite(recursion.upper):
        for ours, theirs in zip(tables.merges(), recursion.merges()):
            np.testing.assert_array_equal(ours, theirs)
    np.testing.assert_allclose(tables.log_partition_bounds(), recursion.log_partition_bounds(),
                               rtol=1e-12, atol=1e-12)
    rng = np.random.default_rng(global_random_seed)
    for mask in rng.integers(1, (1 << n_points) - 1, size=8):
        np.testing.assert_allclose(tables.cluster_log_probability_bounds(int(mask)),
                                   recursion.cluster_log_probability_bounds(int(mask)),
                                   rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("n_points", [3, 8, 12, pytest.param(16, marks=pytest.mark.slow)])
def test_ginkgo_root_solved_by_the_kernel_is_the_trellis(n_points, global_random_seed):
    """A jet solved whole at creation (exact size N) by the kernel: the trellis's MAP tree,
    its cost bit for bit, log Z and the cluster probabilities within 1e-12."""
    energy, X = _ginkgo_cases("jet", n_points, global_random_seed)
    trellis = ExactHierarchicalClustering(energy).fit(X)._trellis
    search = BestFirstSearch(energy.search_bound(X), n_points, exact_size=n_points)
    assert search.solved and search.n_iterations == 0
    assert search.upper == -trellis.log_map[-1]
    merges, log_potentials = search.merges()
    assert log_potentials.sum() == pytest.approx(trellis.map_log_potential, rel=1e-12)
    lower, upper = search.log_partition_bounds()
    assert lower == upper == pytest.approx(trellis.log_partition, rel=1e-12, abs=1e-12)
    rng = np.random.default_rng(global_random_seed)
    masks = {int(m) for m in masks_from_merges(merges, n_points)[n_points:-1]}
    masks |= set(rng.integers(1, (1 << n_points) - 1, size=8).tolist())
    for mask in masks:
        if int(mask).bit_count() < 2:
            continue
        exact = trellis.cluster_log_marginal(_members(int(mask), n_points))
        low, high = search.cluster_log_probability_bounds(int(mask))
        np.testing.assert_allclose([low, high], [exact, exact], rtol=1e-12, atol=1e-12)


###############################################################################
# The partition function and cluster probabilities, bracketed

@pytest.mark.parametrize("n_points", [3, 6, 9, 11])
def test_ginkgo_log_z_upper_holds_on_every_subset(n_points, global_random_seed):
    """log Z(S) <= log_z_upper(S) for all 2**N - 1 subsets, exact up to two points."""
    rng = np.random.default_rng(global_random_seed)
    energy, X = _problem("ginkgo", n_points, rng)
    trellis = ExactHierarchicalClustering(energy).fit(X)._trellis
    bound = energy.search_bound(X)
    for mask in range(1, 1 << n_points):
        log_z = trellis.log_z[mask]
        upper = bound.log_z_upper(_members(mask, n_points))
        if np.isfinite(log_z):
            assert log_z <= upper + 1e-9 * max(1.0, abs(log_z)), mask
        if mask.bit_count() <= 2:
            assert upper == pytest.approx(log_z, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("kind", ["dasgupta", "hcc"])
def test_bounds_without_a_log_z_bound_say_so(kind):
    energy, X = _problem(kind, 4, np.random.default_rng(0))
    bound = energy.search_bound(X)
    assert not bound.bounds_log_z
    assert bound.log_z_upper(np.arange(4)) == np.inf


def _problem_at(kind, n_points, beta, rng):
    """Like ``_problem`` with an explicit inverse temperature (Dasgupta, HCC)."""
    energy, X = _problem(kind, n_points, rng)
    if kind != "ginkgo":
        energy = energy.set_params(beta=beta)
    return energy, X


def _close(value, reference):
    return 1e-9 * max(1.0, abs(reference))


def _assert_brackets(search, trellis, n_points, rng, n_masks=12):
    """lower <= exact <= upper for log Z and for the log probability of clusters."""
    log_z = trellis.log_partition
    lower, upper = search.log_partition_bounds()
    assert lower <= log_z + _close(lower, log_z)
    assert log_z <= upper + _close(upper, log_z)
    masks = {int(m) for m in rng.integers(1, (1 << n_points) - 1, size=n_masks)}
    if np.isfinite(search.upper):
        # The clusters of the best tree found: explored by construction.
        merges, _ = search.merges()
        masks |= {int(m) for m in masks_from_merges(merges, n_points)[n_points:-1]}
    for mask in masks:
        if mask.bit_count() < 2:
            continue
        exact = trellis.cluster_log_marginal(_members(mask, n_points))
        low, high = search.cluster_log_probability_bounds(mask)
        assert low <= exact + 1e-9, (mask, low, exact)
        assert exact <= high + 1e-9, (mask, exact, high)
        assert high <= 0.0


@functools.lru_cache(maxsize=None)
def _exact_problem_at(kind, n_points, beta, seed):
    """``_problem_at`` with its exact trellis, built once for the many budgets tested on it,
    and the state of the generator after it (the tests draw clusters from there)."""
    rng = np.random.default_rng(seed)
    energy, X = _problem_at(kind, n_points, beta, rng)
    trellis = ExactHierarchicalClustering(energy).fit(X)._trellis
    return energy, X, trellis, rng.bit_generator.state


@pytest.mark.parametrize("kind, beta", [("dasgupta", 0.2), ("dasgupta", 1.0),
                                        ("dasgupta", 4.0), ("hcc", 0.5), ("hcc", 2.0),
                                        ("ginkgo", None)])
@pytest.mark.parametrize("objective", ["map", "log_partition"])
@pytest.mark.parametrize("max_states", [1, 4, 20, 100, 1000, -1])
@pytest.mark.parametrize("exact_size", [0, 4, -1])
def test_log_partition_and_cluster_brackets_hold_at_any_budget(
        kind, beta, objective, max_states, exact_size, global_random_seed):
    """Certified at every budget, from a handful of clusters to the end, both walks."""
    n_points = 8
    energy, X, trellis, rng_state = _exact_problem_at(kind, n_points, beta, global_random_seed)
    rng = np.random.default_rng()
    rng.bit_generator.state = rng_state
    search = BestFirstSearch(energy.search_bound(X), n_points, objective=objective,
                             exact_size=exact_size)
    search.run(max_states=max_states)
    _assert_brackets(search, trellis, n_points, rng)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("n_points", [11, 14])
@pytest.mark.parametrize("seconds", [pytest.param(0.005, marks=pytest.mark.slow), 0.05])
def test_brackets_hold_on_larger_problems_stopped_early(kind, n_points, seconds,
                                                        global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    energy, X = _problem_at(kind, n_points, 1.0, rng)
    trellis = ExactHierarchicalClustering(energy).fit(X)._trellis
    for objective in ["map", "log_partition"]:
        search = BestFirstSearch(energy.search_bound(X), n_points, objective=objective,
                                 exact_size=6)
        search.add_tree(_seed_tree(energy, X))
        search.run(seconds=seconds)
        _assert_brackets(search, trellis, n_points, rng)


def _seed_tree(energy, X):
    """The merges of a beam-search tree, as the estimator seeds the search."""
    from sktrellis._engine.agglomerative.builders import beam_search

    return beam_search(energy.merge_model(X), 2)[0].merges


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("exact_size", [0, 5])
def test_brackets_close_on_the_exact_values(kind, exact_size, global_random_seed):
    """Run to the end, the walk sums every tree: log Z and every cluster's probability."""
    rng = np.random.default_rng(global_random_seed)
    n_points = 7
    energy, X = _problem_at(kind, n_points, 1.0, rng)
    trellis = ExactHierarchicalClustering(energy).fit(X)._trellis
    search = BestFirstSearch(energy.search_bound(X), n_points, objective="log_partition",
                             exact_size=exact_size)
    assert search.run() == "optimal"
    assert search.log_partition_solved
    lower, upper = search.log_partition_bounds()
    assert lower == upper
    assert lower == pytest.approx(trellis.log_partition, rel=1e-12, abs=1e-12)
    for mask in range(1, (1 << n_points) - 1):
        if mask.bit_count() < 2:
            continue
        exact = trellis.cluster_log_marginal(_members(mask, n_points))
        low, high = search.cluster_log_probability_bounds(mask)
        np.testing.assert_allclose([low, high], exact, rtol=1e-9, atol=1e-9)


def test_bracket_narrows_as_the_search_goes_on(global_random_seed):
    """Anytime: the bracket only narrows from one slice to the next."""
    rng = np.random.default_rng(global_random_seed)
    energy, X = _problem_at("dasgupta", 12, 1.0, rng)
    search = BestFirstSearch(energy.search_bound(X), 12, objective="log_partition",
                             exact_size=4)
    previous = (-np.inf, np.inf)
    for _ in range(5):
        search.run(seconds=0.01)
        lower, upper = search.log_partition_bounds()
        assert lower >= previous[0] and upper <= previous[1]
        previous = (lower, upper)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("algorithm", ["search", "auto"])
def test_estimator_brackets_log_z_and_cluster_probabilities(kind, algorithm,
                                                            global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    energy, X = _problem_at(kind, 9, 1.0, rng)
    exact = ExactHierarchicalClustering(energy).fit(X)
    for objective in ["map", "log_partition"]:
        model = BestFirstHierarchicalClustering(energy, objective=objective, exact_size=4,
                                                tol=0.0, algorithm=algorithm).fit(X)
        lower, upper = model.log_partition_bounds_
        assert lower <= exact.log_partition_ + 1e-9 * abs(exact.log_partition_)
        assert exact.log_partition_ <= upper + 1e-9 * abs(exact.log_partition_)
        if objective == "log_partition":
            assert upper - lower == pytest.approx(0.0, abs=1e-9)
        assert model.map_log_potential_ <= exact.map_log_potential_ + 1e-9
        for members in [[0, 1], [2, 3, 4], list(range(8))]:
            low, high = model.cluster_probability_bounds(members)
            probability = exact.cluster_probability(members)
            assert low <= probability + 1e-9 and probability <= high + 1e-9
        assert model.cluster_probability_bounds([3]) == (1.0, 1.0)


@pytest.mark.parametrize("objective", ["map", "log_partition"])
def test_auto_solves_by_the_trellis_what_the_search_has_not(objective, global_random_seed,
                                                           monkeypatch):
    """A 14-particle jet not proven when the trellis's time is up: solved exactly."""
    # The trellis estimated at no time, so that the search never finishes
    # first (on a 14-particle jet it needs about 1 s, the trellis 0.1 s).
    monkeypatch.setattr(driver, "inside_pass_seconds", lambda *args: 0.0)
    jet = make_jets(n_leaves=14, random_state=global_random_seed)[0]
    # The search's labels are its tree's cut: compare with the MAP tree's.
    exact = ExactHierarchicalClustering(GinkgoLikelihood(), labels_from="map_tree")
    exact.fit(jet.momenta)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = BestFirstHierarchicalClustering(GinkgoLikelihood(), objective=objective,
                                                n_jobs=1).fit(jet.momenta)
    assert model.solver_ == "trellis"
    assert model.stop_reason_ == "optimal"
    assert model.optimality_gap_ == 0.0
    assert model.map_log_potential_ == exact.map_log_potential_
    assert model.log_potential_upper_bound_ == exact.map_log_potential_
    assert model.log_partition_bounds_ == (exact.log_partition_, exact.log_partition_)
    np.testing.assert_array_equal(model.linkage_matrix_, exact.linkage_matrix_)
    np.testing.assert_array_equal(model.labels_, exact.labels_)
    for members in [[0, 1], [2, 3, 4], list(range(12))]:
        low, high = model.cluster_probability_bounds(members)
        assert low == high == pytest.approx(exact.cluster_probability(members), rel=1e-12)


def test_auto_keeps_the_search_results_when_the_trellis_overruns(monkeypatch):
    """The trellis estimated at no time but past the deadline: the search's results, a warning."""
    monkeypatch.setattr(driver, "inside_pass_seconds", lambda *args: 0.0)
    jet = make_jets(n_leaves=14, random_state=0)[0]
    model = BestFirstHierarchicalClustering(GinkgoLikelihood(), max_time=1e-6)
    with pytest.warns(UserWarning, match=r"stopped \(max_time\) before proving"):
        model.fit(jet.momenta)
    assert model.solver_ == "search"
    assert model.stop_reason_ == "max_time"
    exact = ExactHierarchicalClustering(GinkgoLikelihood()).fit(jet.momenta)
    assert model.map_log_potential_ <= exact.map_log_potential_ + 1e-9
    assert exact.map_log_potential_ <= model.log_potential_upper_bound_ + 1e-9
    lower, upper = model.log_partition_bounds_
    assert lower <= exact.log_partition_ + 1e-9 <= upper + 2e-9


@pytest.fixture
def stepping_clock(monkeypatch):
    """The search driver's clock, advanced by 0.1 s each time it is read.

    Its deadlines then fall after a fixed number of search slices (each at
    most 0.1 s of real time), however loaded the machine: the beam-search
    incumbent, which used to eat the whole budget before the first slice
    under load, costs no time on this clock.
    """
    import types

    clock = {"now": 0.0}

    def perf_counter():
        clock["now"] += 0.1
        return clock["now"]

    monkeypatch.setattr(driver, "time", types.SimpleNamespace(perf_counter=perf_counter))
    return clock


def test_auto_searches_on_when_the_trellis_gives_up(monkeypatch, stepping_clock):
    """A trellis that will not end in time hands the rest of the budget back to the search."""
    from sktrellis._engine.trellis.levels import DeadlinePassed

    def gives_up(*args, **kwargs):
        raise DeadlinePassed("it would end 1 s past its deadline")

    monkeypatch.setattr(driver, "inside_pass_seconds", lambda *args: 0.0)
    monkeypatch.setattr(driver, "HierarchicalTrellis", gives_up)
    jet = make_jets(n_leaves=16, random_state=0)[0]
    with pytest.warns(UserWarning, match=r"stopped \(max_time\)"):
        model = BestFirstHierarchicalClustering(GinkgoLikelihood(), max_time=0.5).fit(
            jet.momenta)
    # The search went on to the end of the budget after the trellis gave up.
    assert stepping_clock["now"] >= 0.5 + 0.1
    assert model.solver_ == "search"
    assert model.stop_reason_ == "max_time"
    assert model.n_iterations_ > 0
    # The counts are the search's at its end, not where the trellis took over.
    search = model._search
    assert (model.n_expanded_, model.n_splits_, model.n_clusters_stored_,
            model.n_iterations_) == (search.n_expanded, search.n_splits, search.n_clusters,
                                     search.n_iterations)


@pytest.mark.parametrize("trellis_ends", [True, False])
def test_auto_after_the_state_cap(monkeypatch, trellis_ends):
    """Stopped by max_states, the search hands over to the trellis; if that gives up, says so."""
    from sktrellis._engine.trellis.levels import DeadlinePassed

    if not trellis_ends:
        def gives_up(*args, **kwargs):
            raise DeadlinePassed("it would end 1 s past its deadline")

        monkeypatch.setattr(driver, "HierarchicalTrellis", gives_up)
    jet = make_jets(n_leaves=14, random_state=0)[0]
    model = BestFirstHierarchicalClustering(GinkgoLikelihood(), max_states=1, max_time=60)
    if trellis_ends:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            model.fit(jet.momenta)
        assert (model.solver_, model.stop_reason_, model.optimality_gap_) == (
            "trellis", "optimal", 0.0)
    else:
        with pytest.warns(UserWarning, match=r"stopped \(max_states\) before proving the "
                                             r"tree optimal \(the trellis over the 2\*\*14"):
            model.fit(jet.momenta)
        assert (model.solver_, model.stop_reason_) == ("search", "max_states")


def test_auto_interrupted_in_the_trellis(monkeypatch):
    """Ctrl-C during the trellis ends the fit with the search's results, as during the search."""
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(driver, "inside_pass_seconds", lambda *args: 0.0)
    monkeypatch.setattr(driver, "HierarchicalTrellis", interrupted)
    jet = make_jets(n_leaves=14, random_state=0)[0]
    with pytest.warns(UserWarning, match=r"stopped \(interrupted\)"):
        model = BestFirstHierarchicalClustering(GinkgoLikelihood()).fit(jet.momenta)
    assert (model.solver_, model.stop_reason_) == ("search", "interrupted")
    assert model.map_log_potential_ >= model.incumbent_log_potential_ - 1e-9


@pytest.mark.parametrize("objective", ["map", "log_partition"])
@pytest.mark.parametrize("n_points", [2, 3, 4])
def test_auto_on_tiny_sets(objective, n_points):
    """Passes of fewer than 16 splits under a deadline: no projection to divide by zero."""
    X = np.random.default_rng(n_points).normal(size=(n_points, 2))
    energy = Dasgupta(beta=1.0)
    exact = ExactHierarchicalClustering(energy).fit(X)
    model = BestFirstHierarchicalClustering(energy, objective=objective, exact_size=0,
                                            max_time=60).fit(X)
    assert model.stop_reason_ == "optimal"
    assert model.map_log_potential_ == pytest.approx(exact.map_log_potential_, abs=1e-12)


def test_auto_verbose_says_when_the_trellis_takes_over(monkeypatch, capsys):
    monkeypatch.setattr(driver, "inside_pass_seconds", lambda *args: 0.0)
    jet = make_jets(n_leaves=14, random_state=0)[0]
    BestFirstHierarchicalClustering(GinkgoLikelihood(), verbose=1).fit(jet.momenta)
    assert "not finished by search: solving the 2**14 subsets by the trellis" in (
        capsys.readouterr().out)


def test_auto_searches_the_whole_budget_when_it_cannot_hold_the_trellis(monkeypatch,
                                                                      stepping_clock):
    """A trellis estimated at longer than max_time is never started."""
    monkeypatch.setattr(driver, "inside_pass_seconds", lambda *args: 1e6)
    calls = []
    monkeypatch.setattr(driver, "HierarchicalTrellis", lambda *args, **kwargs: calls.append(1))
    # A jet the search does not prove in the few slices of the budget.
    jet = make_jets(n_leaves=16, random_state=0)[0]
    with pytest.warns(UserWarning, match=r"stopped \(max_time\)"):
        model = BestFirstHierarchicalClustering(GinkgoLikelihood(), max_time=0.3).fit(
            jet.momenta)
    assert not calls
    assert model.solver_ == "search"
    assert model.n_iterations_ > 0
    assert stepping_clock["now"] >= 0.3


def test_tol_stops_the_log_partition_search():
    X, _ = make_blobs(n_samples=14, centers=2, random_state=0)
    model = BestFirstHierarchicalClustering(Dasgupta(beta=0.5), objective="log_partition",
                                            exact_size=4, tol=1.0, algorithm="search").fit(X)
    lower, upper = model.log_partition_bounds_
    assert upper - lower <= 1.0
    assert model.stop_reason_ == "optimal"


@pytest.mark.parametrize("algorithm", ["search", "auto"])
def test_cluster_probability_bounds_errors_and_pickling(algorithm):
    import pickle

    X, _ = make_blobs(n_samples=8, centers=2, random_state=0)
    model = BestFirstHierarchicalClustering(Dasgupta(beta=1.0), algorithm=algorithm).fit(X)
    with pytest.raises(ValueError, match="members must be 1 to 8 indices"):
        model.cluster_probability_bounds([0, 8])
    with pytest.raises(ValueError, match="members must be 1 to 8 indices"):
        model.cluster_probability_bounds([])
    restored = pickle.loads(pickle.dumps(model))
    assert restored.log_partition_bounds_ == model.log_partition_bounds_
    with pytest.raises(ValueError, match="not pickled; fit the estimator again"):
        restored.cluster_probability_bounds([0, 1])


@pytest.mark.parametrize("kwargs, match", [
    ({"objective": "mean"}, "objective must be 'map' or 'log_partition'"),
    ({"exact_size": 21}, "exact_size must be -1 .* got exact_size=21"),
])
def test_kernel_refuses_bad_objective_and_exact_size(kwargs, match):
    bound = Dasgupta(affinity="precomputed", beta=1.0).search_bound(np.ones((3, 3)))
    with pytest.raises(ValueError, match=match):
        BestFirstSearch(bound, 3, **kwargs)


###############################################################################
# Budgets at the defaults: a minute, half the memory this process can get,
# and an allocation failure stops the search as the cap does.

_UNDER_RLIMIT_AS = """
import resource, sys, warnings
import numpy as np
from sktrellis import BestFirstHierarchicalClustering
from sktrellis._engine.resources import _status_bytes

resource.setrlimit(resource.RLIMIT_AS, (_status_bytes("VmSize") + 300 * 2**20,
                                        resource.RLIM_INFINITY))
X = np.random.default_rng(0).normal(size=(40, 2))
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    model = BestFirstHierarchicalClustering(
        max_states={max_states}, incumbent="beam", algorithm="search", max_time=120).fit(X)
assert model.stop_reason_ == "max_states", model.stop_reason_
assert model.optimality_gap_ > 0 and model.map_log_potential_ >= model.incumbent_log_potential_
assert model.linkage_matrix_.shape == (39, 4)
print([str(w.message) for w in caught])
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS and /proc")
@pytest.mark.parametrize("max_states, note", [
    # Each subprocess costs 1.5-2 CPU seconds: the quick suite keeps the
    # cap following a monkeypatched reading of the memory
    # (test_the_default_state_cap_follows_the_memory_found).
    pytest.param("None", "stopped (max_states) before proving the tree optimal: ",
                 marks=pytest.mark.slow),
    pytest.param("10**12", "an allocation failed before the state cap",
                 marks=pytest.mark.slow),
])
def test_a_search_under_a_memory_limit_keeps_its_tree(max_states, note):
    """Under RLIMIT_AS of 1 GiB a 40-point fit died with std::bad_alloc, its tree lost.

    By default the state cap comes from the memory the guard finds; past
    an explicit cap, the failed allocation stops the search as the cap does.
    """
    result = subprocess.run(
        [sys.executable, "-c", _UNDER_RLIMIT_AS.format(max_states=max_states)],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"})
    assert result.returncode == 0, result.stderr[-2000:]
    assert note in result.stdout


def test_the_default_state_cap_follows_the_memory_found(monkeypatch):
    from sktrellis._engine import resources

    X = np.random.default_rng(0).normal(size=(40, 2))
    monkeypatch.setattr(resources, "memory_limits", lambda: [("MemAvailable", 4 * 2**20)])
    model = BestFirstHierarchicalClustering(incumbent="beam", algorithm="search")
    with pytest.warns(UserWarning, match=r"stopped \(max_states\)"):
        model.fit(X)
    # 2 MiB of states of 64 + 18 * 40 bytes.
    assert model.stop_reason_ == "max_states"
    assert model.n_clusters_stored_ <= 2 * 2**20 // (64 + 18 * 40)


def test_the_default_budget_is_a_minute_and_announced(capsys):
    assert BestFirstHierarchicalClustering().max_time == 60.0
    X = np.random.default_rng(0).normal(size=(6, 2))
    BestFirstHierarchicalClustering(verbose=1).fit(X)
    out = capsys.readouterr().out
    assert "budget: max_time=60 s (the default); at most" in out
    assert "search states, about" in out


@pytest.mark.parametrize("max_states", [1, 50])
def test_the_relative_gap_is_the_gap_over_the_log_potential(max_states):
    X = np.random.default_rng(1).normal(size=(30, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = BestFirstHierarchicalClustering(
            max_states=max_states, incumbent="beam", algorithm="search").fit(X)
    assert model.relative_optimality_gap_ == pytest.approx(
        model.optimality_gap_ / abs(model.map_log_potential_))
    proven = BestFirstHierarchicalClustering().fit(X[:8])
    assert proven.optimality_gap_ == proven.relative_optimality_gap_ == 0.0


def test_the_relative_gap_of_a_zero_log_potential():
    from sktrellis._best_first import _relative_gap

    assert _relative_gap(0.0, 0.0) == 0.0
    assert _relative_gap(1.0, 0.0) == np.inf
    assert _relative_gap(2.0, -4.0) == 0.5


def test_the_sparse_incumbent_is_at_the_searchs_temperature():
    """beta="auto" is 1 for the search: the incumbent's fit must not calibrate its own."""
    X, _ = make_blobs(n_samples=20, n_features=12, centers=2, random_state=0)
    energy = Dasgupta()
    auto = BestFirstHierarchicalClustering(energy, algorithm="search").fit(X)
    one = BestFirstHierarchicalClustering(Dasgupta(beta=1.0), algorithm="search").fit(X)
    assert auto.beta_ == 1.0
    assert auto.incumbent_log_potential_ == pytest.approx(one.incumbent_log_potential_,
                                                          rel=1e-12)
    assert auto.incumbent_log_potential_ <= auto.map_log_potential_ + 1e-9
    assert energy.beta == "auto"


# A bound blind to the assignment (Ginkgo) gives every partial split the same
# key; its generator enumerates the splits by the size of their smaller side,
# in order of a bound per size (``size_classes``), so that a cluster's bound
# rises before all of its 2**(m - 1) splits are evaluated.


def _ginkgo_at(n_points, seed):
    momenta = make_jets(n_leaves=n_points, random_state=seed)[0].momenta
    return GinkgoLikelihood(), momenta


@pytest.fixture(params=[False, True], ids=["size-classes", "sides"])
def ginkgo_generator(request):
    """Ginkgo bounds made in the test go by size classes, or see the sides (the default)."""
    from sktrellis._engine.search import _ginkgo_bound

    previous = _ginkgo_bound.use_sides_bound(request.param)
    yield request.param
    _ginkgo_bound.use_sides_bound(previous)


@pytest.mark.parametrize("n_points", [6, pytest.param(7, marks=pytest.mark.slow)])
def test_size_classes_bound_every_tree_of_their_class(n_points, global_random_seed):
    """Against every tree: each class bounds the trees whose top split is in it."""
    energy, X = _ginkgo_at(n_points, global_random_seed)
    bound = energy.search_bound(X)
    keys = bound.size_classes(np.arange(n_points))
    assert keys.shape == (n_points // 2,)
    assert keys.min() == pytest.approx(bound.lower(np.arange(n_points)), rel=1e-12)
    _, _, trees, values = brute_force(energy.split_potential(X), n_points)
    smaller = np.array([min(bin(tree[0][1]).count("1"), n_points - bin(tree[0][1]).count("1"))
                        for tree in trees])
    for p in range(1, n_points // 2 + 1):
        best = values[smaller == p].max(initial=-np.inf)
        assert -keys[p - 1] >= best - 1e-9 * max(1.0, abs(best))


def test_bounds_without_size_classes_say_so():
    assert Dasgupta().search_bound(np.random.default_rng(0).normal(size=(6, 2))).size_classes(
        np.arange(6)) is None
    energy, X = _ginkgo_at(6, 0)
    assert energy.search_bound(X).size_classes(np.arange(2)) is None


@pytest.mark.parametrize("n_points", [6, pytest.param(7, marks=pytest.mark.slow)])
def test_search_by_size_classes_matches_brute_force(n_points, global_random_seed,
                                                    ginkgo_generator):
    """No exact solves: every cluster of 3 or more points is searched (by size classes, or
    by the sides' keys).

    Stopped early at any state cap, its bound stays below the best tree.
    """
    energy, X = _ginkgo_at(n_points, global_random_seed)
    _, best, _, _ = brute_force(energy.split_potential(X), n_points)
    bound = energy.search_bound(X)
    for max_states in (4, 16, 64):
        search = BestFirstSearch(bound, n_points, exact_size=0)
        search.run(max_states=max_states)
        assert -search.lower >= best - 1e-9 * max(1.0, abs(best))
    search = BestFirstSearch(bound, n_points, exact_size=0)
    assert search.run() == "optimal"
    assert -search.upper == pytest.approx(best, rel=1e-9, abs=1e-9)
    merges, log_potentials = search.merges()
    assert log_potentials.sum() == pytest.approx(best, rel=1e-9, abs=1e-9)


def test_a_blind_generator_bound_rises_before_its_last_split(global_random_seed, ginkgo_generator):
    """Its next key passes the cluster's own bound while splits are still to come."""
    energy, X = _ginkgo_at(9, global_random_seed)
    bound = energy.search_bound(X)
    members = np.arange(9)
    base = bound.lower(members)
    generator = SplitGenerator(bound, members)
    keys = []
    while generator.next_key < np.inf:
        keys.append(generator.next_key)
        generator.pop_split()
    assert np.all(np.diff(keys) >= 0)
    risen = next(k for k, key in enumerate(keys) if key > base + 1e-9 * abs(base))
    assert risen < len(keys) - 1


def test_the_search_bound_rises_before_the_root_is_enumerated(global_random_seed,
                                                             ginkgo_generator):
    """Bounded by states, not the clock: the root's bound rises with splits of it unevaluated.

    (Before the size classes a Ginkgo root's bound stood at the bound of
    the whole set until all 2**(N - 1) of its splits had been evaluated: at
    22 particles, about a minute.)
    """
    # 13 points: 4,095 splits of the root, at most 1,716 in a class.
    energy, X = _ginkgo_at(13, global_random_seed)
    bound = energy.search_bound(X)
    base = bound.lower(np.arange(13))
    search = BestFirstSearch(bound, 13, exact_size=4)
    max_states = 1
    while search.lower <= base + 1e-9 * abs(base):
        max_states += 16
        assert search.run(max_states=max_states) == "max_states"
        assert search.root_split_keys < 2 ** 12 - 1
        assert search.n_split_keys >= search.root_split_keys


# The Ginkgo bound sees the sides (``partial_key``): a partial split's key is
# a bound over the splits completing it from its sides' points, so partial
# splits differ and the generator prunes and orders before the last point.


def _completed_split_costs(bound, best, members):
    """Best cost of a tree over ``members`` with each top split, by split code.

    Code c puts members[k] on side B iff bit k of c is set (bit 0 clear);
    each split's best cost is its own plus the best of its parts (``best``,
    the trellis's over every subset).
    """
    m = len(members)
    codes = np.arange(1, 1 << (m - 1)) << 1
    in_b = (codes[:, None] >> np.arange(m)) & 1 == 1
    bits = np.left_shift(1, members)
    costs = np.array([bound.split_cost(members, ~row) + best[bits[~row].sum()]
                      + best[bits[row].sum()] for row in in_b])
    return codes, costs


def _assert_partial_keys_bound_their_splits(bound, members, codes, costs):
    """Every partial assignment's key is at most its best completion; returns the keys."""
    m = len(members)
    keys = []
    for n_assigned in range(1, m):
        for code in range(0, 1 << n_assigned, 2):
            sides = (code >> np.arange(n_assigned)) & 1
            key = bound.partial_key(members, sides)
            completions = costs[(codes & ((1 << n_assigned) - 1)) == code]
            truth = completions.min(initial=np.inf)
            assert key <= truth + 1e-9 * max(1.0, abs(truth)), (members, sides, key, truth)
            keys.append(key)
    return np.array(keys)


@pytest.mark.parametrize("n_points", [6, pytest.param(7, marks=pytest.mark.slow)])
def test_ginkgo_partial_keys_bound_every_tree_that_completes_them(n_points,
                                                                  global_random_seed):
    """Against every tree of the jet: a partial split's key is at most the cost of every
    tree whose top split completes it, and keys see the sides (they differ, and rise above
    the blind bound of the whole set)."""
    energy, X = _ginkgo_at(n_points, global_random_seed)
    _, _, trees, values = brute_force(energy.split_potential(X), n_points)
    members = np.arange(n_points)
    top = np.array([tree[0][1] for tree in trees])
    lefts = np.unique(top)
    # Code c has members[k] on side B iff bit k is set: side B is the right part.
    codes = np.array([((1 << n_points) - 1) ^ left for left in lefts])
    costs = np.array([-values[top == left].max() for left in lefts])
    bound = energy.search_bound(X)
    keys = _assert_partial_keys_bound_their_splits(bound, members, codes, costs)
    assert np.unique(keys).size > n_points
    assert keys.max() > bound.lower(members) + 1.0


GINKGO_CASES = {
    "jet": lambda rng, X: GinkgoLikelihood(),
    "lam below 1": lambda rng, X: GinkgoLikelihood(lam=0.5),
    "lam 6, low cut": lambda rng, X: GinkgoLikelihood(lam=6.0, t_cut=1.0),
    "lam below 1, cut 1e-3": lambda rng, X: GinkgoLikelihood(lam=0.5, t_cut=1e-3),
    "cut among the pairs": lambda rng, X: GinkgoLikelihood(
        t_cut=float(np.quantile(_pair_masses(X)[np.triu_indices(len(X), 1)], 0.4))),
}


@pytest.mark.parametrize("case", [*GINKGO_CASES, "off the shower", "collinear off the shower",
                                  "energies far above the cut"])
def test_ginkgo_partial_keys_bound_their_splits_on_every_cluster(case, global_random_seed):
    """On every cluster of 3 or more of 7 points, for other parameters and cuts (down to
    1e-3), for massless momenta in random directions a rounding below light speed (and three
    of them so collinear that their pair masses are negative: the sides' t ranges hold by
    their margin alone, without which this case fails on about half the seeds), and with
    energies so high that the rounding margin of t passes the cut."""
    rng = np.random.default_rng(global_random_seed)
    if case == "collinear off the shower":
        spread = np.array([1e-5] * 3 + [1e-2] * 4)[:, None]
        p = np.array([0.0, 0.0, 1.0]) + rng.normal(size=(7, 3)) * spread
        p *= rng.uniform(1, 20, size=(7, 1)) / np.linalg.norm(p, axis=1, keepdims=True)
        X = np.column_stack([np.linalg.norm(p, axis=1) * (1 - 9.9e-10), p])
        energy = GinkgoLikelihood(t_cut=1e-2)
        assert energy.search_bound(X).pair_mass.min() < 0
    elif case == "off the shower":
        p = rng.normal(size=(7, 3)) * rng.uniform(1, 20, size=(7, 1))
        X = np.column_stack([np.linalg.norm(p, axis=1) * (1 - 5e-10), p])
        energy = GinkgoLikelihood()
    elif case == "energies far above the cut":
        X = make_jets(n_leaves=7, random_state=global_random_seed)[0].momenta * 1e4
        energy = GinkgoLikelihood()
    else:
        X = make_jets(n_leaves=7, random_state=global_random_seed)[0].momenta
        energy = GINKGO_CASES[case](rng, X)
    bound = energy.search_bound(X)
    best = -ExactHierarchicalClustering(energy).fit(X)._trellis.log_map
    for mask in range(1, 1 << 7):
        # In any order of assignment (the generator's is the bound's own).
        members = rng.permutation(_members(mask, 7))
        if len(members) >= 3:
            codes, costs = _completed_split_costs(bound, best, members)
            _assert_partial_keys_bound_their_splits(bound, members, codes, costs)


@pytest.mark.parametrize("jets", [slice(0, 10), pytest.param(slice(10, None),
                                                               marks=pytest.mark.slow)])
def test_ginkgo_partial_keys_bound_the_published_jets(jets):
    """The whole jet's partial keys against its splits' best trees, on the 60 AISTATS 2021
    jets (the first ten quickly)."""
    for case in _published_jets()[jets]:
        X = np.array(case["leaves_4momenta"])
        energy = GinkgoLikelihood(lam=case["params"]["lambda"], t_cut=case["params"]["t_cut"])
        members = np.arange(len(X))
        bound = energy.search_bound(X)
        best = -ExactHierarchicalClustering(energy).fit(X)._trellis.log_map
        codes, costs = _completed_split_costs(bound, best, members)
        assert costs.min() == pytest.approx(-case["map_loglik"], rel=1e-9)
        _assert_partial_keys_bound_their_splits(bound, members, codes, costs)


# Nearly collinear momenta as validation accepts them: E = |p| (1 - 9.9e-10), the points'
# own t and some pair masses negative; with lam < 1 and the cut about 1e-9 E**2 the node
# of rows 0, 4 and 7 is lighter than its own child, rows 4 and 7.
SPACELIKE_COLLINEAR = np.array([
    [2.5573310861006807e+01, -6.1734291688453076e-04, 3.2097426102656166e-04,
     2.5573310876858717e+01],
    [1.1436891627303350e+01, -6.3349511723120020e-04, 4.5809737077114862e-04,
     1.1436891611906667e+01],
    [2.0901520057406454e+01, -8.0476889356519208e-05, -6.2908261087620996e-04,
     2.0901520068477133e+01],
    [3.4727649832843596e+01, -1.5715717467520914e-04, 3.9089535748014053e-04,
     3.4727649864668400e+01],
    [4.1587492478388448e+01, -1.6167777445098932e-03, 1.6405979522001431e-03,
     4.1587492455772477e+01],
    [3.9110706574154875e+01, -1.0754471540668472e-03, -1.0555500128750805e-03,
     3.9110706583844411e+01],
    [1.2955960889080742e+00, -1.2860900596812212e-04, 6.1086662945364137e-05,
     1.2955960823673436e+00],
    [4.5479195267657538e+01, 2.3494081553768567e-03, -8.2316817581901179e-04,
     4.5479195244548315e+01],
    [6.5560793659390848e+00, -1.2631169467676131e-04, -9.8849276485230898e-04,
     6.5560792966928298e+00],
    [3.2935475456996748e+01, 2.8295397241363607e+00, 3.8669200893477446e-01,
     3.2811426667641129e+01]])
# Massless up to rounding, seven of them within 1e-5 rad: with a cut of 3e-14 E**2 the
# likelihood's sums and the bound's bilinear ones differ by a few per cent of the cut.
ROUNDED_COLLINEAR = np.array([
    [3.9819940023247540e+01, -4.0925165908493704e-06, -8.7175175941970199e-06,
     3.9819940023246374e+01],
    [3.6680861122500943e+01, 5.4379736654916500e-06, -6.3162238256295599e-06,
     3.6680861122499998e+01],
    [6.8092983426629177e+00, 2.9851495083322712e-06, 2.5823679624184809e-06,
     6.8092983426617737e+00],
    [1.9885019132218648e+01, -3.8389030540902768e-06, 2.1652808165313045e-06,
     1.9885019132218158e+01],
    [2.7330273316657109e+01, -2.3359501226283310e-06, -8.1793808955823316e-06,
     2.7330273316655788e+01],
    [1.5986981175353900e+00, -4.3670094511276378e-07, 9.8325084107599455e-09,
     1.5986981175353303e+00],
    [4.5237278260285542e+01, -6.7065251760680904e-06, 2.2742781783107423e-06,
     4.5237278260284988e+01],
    [4.6571445340182656e+01, -2.0309439092089399e+00, 5.9210398277168785e-01,
     4.6523372629086708e+01],
    [2.3573353420936723e+01, 4.8421618809839373e+00, 7.7242856039818495e+00,
     2.1739178267240323e+01]])


@pytest.mark.parametrize("X, lam, t_cut, members", [
    (SPACELIKE_COLLINEAR, 0.3, 3.3098197321015017e-06, [6, 5, 8, 9, 0, 4, 3]),
    (ROUNDED_COLLINEAR, 8.0, 7.100541512149548e-11, [6, 0, 2, 8, 4, 3]),
], ids=["a node lighter than its child", "the cut near rounding"])
def test_ginkgo_bound_on_nearly_collinear_momenta(X, lam, t_cut, members):
    """lower(S) on every subset against its best tree, and a cluster's partial keys against
    every completion: where a node is lighter than its own child (lam < 1: g peaks below the
    child's t), and where the cut is as small as the rounding of the masses."""
    energy = GinkgoLikelihood(lam=lam, t_cut=t_cut)
    X = energy.check_momenta(X)
    if lam < 1:
        t = _pair_masses(X)
        triple = np.sum(X[[0, 4, 7]], axis=0)
        assert t_cut <= triple[0] ** 2 - triple[1:] @ triple[1:] < t[4, 7]
    _assert_admissible_everywhere(energy, X)
    bound = energy.search_bound(X)
    best = -ExactHierarchicalClustering(energy).fit(X)._trellis.log_map
    members = np.array(members)
    codes, costs = _completed_split_costs(bound, best, members)
    _assert_partial_keys_bound_their_splits(bound, members, codes, costs)


def test_ginkgo_bound_on_nearly_collinear_momenta_turned_and_scaled(global_random_seed):
    """As above on the first jet turned at random and scaled, its cut with it (the same
    likelihood up to rounding, other roundings): every subset's lower and the cluster's
    keys."""
    from scipy.spatial.transform import Rotation

    rng = np.random.default_rng(global_random_seed)
    scale = rng.uniform(0.1, 10.0)
    turn = Rotation.random(random_state=rng).as_matrix()
    X = np.column_stack([SPACELIKE_COLLINEAR[:, 0], SPACELIKE_COLLINEAR[:, 1:] @ turn.T])
    energy = GinkgoLikelihood(lam=0.3, t_cut=3.3098197321015017e-06 * scale ** 2)
    X = energy.check_momenta(X * scale)
    _assert_admissible_everywhere(energy, X)
    bound = energy.search_bound(X)
    best = -ExactHierarchicalClustering(energy).fit(X)._trellis.log_map
    members = rng.permutation([6, 5, 8, 9, 0, 4, 3])
    codes, costs = _completed_split_costs(bound, best, members)
    _assert_partial_keys_bound_their_splits(bound, members, codes, costs)


def test_ginkgo_split_cost_sums_in_index_order(global_random_seed):
    """The split generator assigns the softest points first: a split's cost is the sorted
    cluster's bit for bit, as the exact solves and the trellis have it."""
    rng = np.random.default_rng(global_random_seed)
    energy, X = _ginkgo_at(9, global_random_seed)
    bound = energy.search_bound(X)
    for _ in range(50):
        members = np.sort(rng.choice(9, rng.integers(2, 10), replace=False))
        in_a = rng.random(len(members)) < 0.5
        order = rng.permutation(len(members))
        assert (bound.split_cost(members[order], in_a[order])
                == bound.split_cost(members, in_a))


def test_partial_keys_need_a_partial_assignment():
    energy, X = _ginkgo_at(6, 0)
    bound = energy.search_bound(X)
    for sides in ([], [1, 0], [0] * 6):
        with pytest.raises(ValueError, match="first point to side A and leave one free"):
            bound.partial_key(np.arange(6), sides)
    assert Dasgupta().search_bound(X).partial_key(np.arange(6), [0, 1]) == -np.inf


@pytest.mark.parametrize("kind, beta", [("dasgupta", 1.0), ("hcc", 2.0), ("ginkgo", None)])
@pytest.mark.parametrize("objective", ["map", "log_partition"])
@pytest.mark.parametrize("max_revisions", [0, 1, 5, 20, 100])
def test_a_refresh_cut_short_anywhere_keeps_the_brackets_certified(
        kind, beta, objective, max_revisions, global_random_seed):
    """The revision of the brackets stopped after any number of clusters, against the trellis.

    Ginkgo jets have splits of zero potential (-inf log potential).
    """
    n_points = 8
    energy, X, trellis, rng_state = _exact_problem_at(kind, n_points, beta, global_random_seed)
    rng = np.random.default_rng()
    rng.bit_generator.state = rng_state
    search = BestFirstSearch(energy.search_bound(X), n_points, objective=objective,
                             exact_size=0)
    search.run(max_states=60)
    lower, upper = search.log_partition_bounds(max_revisions=max_revisions)
    assert search.n_revised == min(max_revisions, search.n_clusters)
    assert search.log_partition_refreshed == (max_revisions >= search.n_clusters)
    log_z = trellis.log_partition
    assert lower <= log_z + _close(lower, log_z)
    assert log_z <= upper + _close(upper, log_z)
    for mask in {int(m) for m in rng.integers(1, (1 << n_points) - 1, size=8)}:
        if mask.bit_count() < 2:
            continue
        exact = trellis.cluster_log_marginal(_members(mask, n_points))
        low, high = search.cluster_log_probability_bounds(mask, seconds=0.0)
        assert low <= exact + 1e-9 and exact <= high + 1e-9 and high <= 0.0


def _searched_by_map(kind, seed, seeded=False):
    energy, X, _, _ = _exact_problem_at(kind, 8, 1.0 if kind != "ginkgo" else None, seed)
    search = BestFirstSearch(energy.search_bound(X), 8, exact_size=0)
    if seeded:
        search.add_tree(_seed_tree(energy, X))
    search.run(max_states=60)
    return search


@pytest.mark.parametrize("kind", KINDS)
def test_a_refresh_with_no_time_left_revises_only_the_root(kind, global_random_seed):
    """seconds=0 revises no cluster but the root; a full revision narrows the bracket further.

    The MAP walks never revise the log Z brackets: the root's lower bound
    is -inf until the root is revised, which a revision cut short ends
    with (from its parts' brackets as they are; its best tree alone gives
    ``-upper``).
    """
    search = _searched_by_map(kind, global_random_seed)
    walked = search.root_log_partition_bracket
    assert walked[0] == -np.inf
    cut = search.log_partition_bounds(seconds=0.0)
    assert search.n_revised == 0 and not search.log_partition_refreshed
    assert cut == search.root_log_partition_bracket
    assert -search.upper <= cut[0] and cut[1] <= walked[1]
    same = _searched_by_map(kind, global_random_seed)
    assert same.root_log_partition_bracket == walked
    refreshed = same.log_partition_bounds()
    assert same.log_partition_refreshed and same.n_revised == same.n_clusters
    assert refreshed != walked
    assert cut[0] <= refreshed[0] and refreshed[1] <= cut[1]
    # A complete refresh is a fixed point: the next one has nothing to do
    # until the search changes.
    assert same.log_partition_bounds() == refreshed and same.n_revised == 0
    same.run(max_states=same.n_states + 1)
    assert not same.log_partition_refreshed


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("cut", ["no time", "one cluster", "all but one"])
def test_a_map_search_cut_short_keeps_its_best_tree_as_a_lower_bound(kind, cut,
                                                                    global_random_seed):
    """Smallest clusters first puts the root last: a cut revision still revises it.

    Without that, the bracket of a MAP search (whose walks never touch the
    lower bounds) stayed at -inf below whenever the revision was cut.
    """
    search = _searched_by_map(kind, global_random_seed, seeded=True)
    assert np.isfinite(search.upper)
    limit = {"no time": dict(seconds=0.0), "one cluster": dict(max_revisions=1),
             "all but one": dict(max_revisions=search.n_clusters - 1)}[cut]
    lower, _ = search.log_partition_bounds(**limit)
    assert not search.log_partition_refreshed
    assert lower >= -search.upper


@pytest.mark.parametrize("seconds", [-1.0, np.nan])
def test_a_refresh_refuses_a_negative_time(seconds):
    energy, X = _problem("dasgupta", 4, np.random.default_rng(0))
    search = BestFirstSearch(energy.search_bound(X), 4)
    with pytest.raises(ValueError, match="seconds must be at least 0"):
        search.log_partition_bounds(seconds=seconds)
    with pytest.raises(ValueError, match="seconds must be at least 0"):
        search.cluster_log_probability_bounds(3, seconds=seconds)


def test_a_refresh_cut_by_the_clock_mid_pass_keeps_the_brackets_certified(global_random_seed):
    """Budgets from 0.1 us up: the clock (read every 1024 split terms) stops passes after some
    of the clusters until one completes; every bracket on the way holds log Z, and each
    pass only narrows it."""
    n_points = 10
    energy = Dasgupta(beta=0.5)
    X = np.random.default_rng(global_random_seed).normal(size=(n_points, 2))
    log_z = ExactHierarchicalClustering(energy).fit(X).log_partition_
    search = BestFirstSearch(energy.search_bound(X), n_points, objective="log_partition",
                             exact_size=0)
    search.run(max_states=6000)
    previous = search.root_log_partition_bracket
    cut_mid_pass = 0
    for seconds in np.geomspace(1e-7, 1.0, 60):
        lower, upper = search.log_partition_bounds(seconds=seconds)
        assert lower <= log_z + _close(lower, log_z) and log_z <= upper + _close(upper, log_z)
        assert previous[0] <= lower and upper <= previous[1]
        previous = lower, upper
        if search.log_partition_refreshed:
            break
        cut_mid_pass += 0 < search.n_revised < search.n_clusters
    assert search.log_partition_refreshed and search.n_revised == search.n_clusters
    assert cut_mid_pass > 0


@pytest.mark.parametrize("kind", KINDS)
def test_a_new_tree_calls_for_a_new_revision(kind, global_random_seed):
    """add_tree changes the graph: a complete revision before it is no longer current."""
    energy, X, _, _ = _exact_problem_at(kind, 8, 1.0 if kind != "ginkgo" else None,
                                        global_random_seed)
    search = BestFirstSearch(energy.search_bound(X), 8, exact_size=0)
    search.run(max_states=60)
    search.log_partition_bounds()
    assert search.log_partition_refreshed
    search.add_tree(_seed_tree(energy, X))
    assert not search.log_partition_refreshed
    lower, _ = search.log_partition_bounds()
    assert search.log_partition_refreshed and search.n_revised == search.n_clusters
    assert lower >= -search.upper


def test_a_map_fit_with_no_time_left_for_the_revision_keeps_its_tree_below_log_z(monkeypatch):
    """The fit's last revision cut at once still revises the root: its lower bound is the
    best tree's log potential at worst, not the -inf the MAP walks leave there."""
    monkeypatch.setattr(driver, "_LEAST_REFRESH_SECONDS", 0.0)
    X = np.random.default_rng(0).normal(size=(24, 2))
    model = BestFirstHierarchicalClustering(Dasgupta(beta=2.0), max_time=1e-6,
                                            algorithm="search")
    with pytest.warns(UserWarning, match=r"stopped \(max_time\)"):
        model.fit(X)
    assert not model._search.log_partition_refreshed
    lower, upper = model.log_partition_bounds_
    assert model.map_log_potential_ <= lower <= upper < np.inf
def test_ginkgo_partial_keys_are_the_same_with_the_sides_tables_kept(global_random_seed):
    """The sides' tables kept by widest set give every key bit for bit as computed afresh:
    along assignments (a child shares a widest set with its parent), and in random order,
    where a widest set comes back after another took its slot (some 500 widest sets in 4096
    slots: about 30 land in a slot already taken; no test fills every slot)."""
    from sktrellis._engine.search import _ginkgo_bound

    rng = np.random.default_rng(global_random_seed)
    energy, X = _ginkgo_at(24, global_random_seed)
    previous = _ginkgo_bound.reuse_side_tables(True)
    try:
        kept = energy.search_bound(X)
        _ginkgo_bound.reuse_side_tables(False)
        fresh = energy.search_bound(X)
    finally:
        _ginkgo_bound.reuse_side_tables(previous)
    states = []
    for _ in range(40):
        members = rng.permutation(24)[:rng.integers(3, 25)]
        sides = rng.integers(0, 2, size=len(members) - 1)
        sides[0] = 0
        # Each prefix of an assignment, as the generator pushes them.
        states += [(members, sides[:n_assigned]) for n_assigned in range(1, len(members))]
    order = np.concatenate([np.arange(len(states)), rng.permutation(len(states))])
    for k in order:
        members, sides = states[k]
        assert kept.partial_key(members, sides) == fresh.partial_key(members, sides)


def test_ginkgo_bound_makes_its_sides_tables_at_its_first_partial_key():
    """A search whose clusters are all solved exactly asks for no partial key, and its
    bound holds no sides' tables (a fitted estimator keeps its search); the first key makes
    them, in no more slots than the jet has subsets."""
    energy, X = _ginkgo_at(10, 0)
    bound = energy.search_bound(X)
    assert BestFirstSearch(bound, 10).run() == "optimal"
    assert bound.n_partial_keys == 0 and bound.side_slots == 0
    bound.partial_key(np.arange(10), [0, 1])
    assert bound.side_slots == 2 ** 10
    energy, X = _ginkgo_at(14, 0)
    bound = energy.search_bound(X)
    bound.partial_key(np.arange(14), [0, 1])
    assert bound.side_slots == 2 ** 12

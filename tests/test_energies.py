"""Energy models: every tabulated split potential against its formula, computed naively."""
import itertools
import math

import numpy as np
import pytest
from scipy.spatial.distance import cdist

from sktrellis.datasets import make_jets
from sktrellis.energies import (
    CorrelationClustering, Dasgupta, GinkgoLikelihood, SplitEnergy,
)
from sktrellis.energies._tree_prior import split_log_prior
from sktrellis._engine.tables import subset_pair_sums, subset_sizes, subset_sums

from .common import all_trees


def _canonical_splits(n_points):
    """Every (parent, left) canonical split of every subset of size >= 2."""
    for parent in range(1, 1 << n_points):
        members = [i for i in range(n_points) if parent >> i & 1]
        if len(members) < 2:
            continue
        low, rest = members[0], members[1:]
        for r in range(len(rest)):
            for chosen in itertools.combinations(rest, r):
                yield parent, (1 << low) | sum(1 << i for i in chosen)


def _points(mask, n_points):
    return [i for i in range(n_points) if mask >> i & 1]


def _evaluate_all(potential, n_points):
    splits = list(_canonical_splits(n_points))
    parents = np.array([p for p, _ in splits], dtype=np.uint32)
    lefts = np.array([a for _, a in splits], dtype=np.uint32)
    return splits, potential.evaluate(parents, lefts)


def test_subset_tables_match_direct_sums(global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    values = rng.normal(size=(6, 2))
    weights = rng.normal(size=(6, 6))
    weights = weights + weights.T
    sums, pairs, sizes = subset_sums(values), subset_pair_sums(weights), subset_sizes(6)
    for mask in range(1 << 6):
        members = _points(mask, 6)
        np.testing.assert_allclose(sums[mask], values[members].sum(axis=0), atol=1e-12)
        expected = sum(weights[i, j] for i, j in itertools.combinations(members, 2))
        assert pairs[mask] == pytest.approx(expected, abs=1e-12)
        assert sizes[mask] == len(members)


def _log_tree_prior(tree_prior, n_parent):
    """The tree prior's log factor of a split of an n_parent-point cluster."""
    return -math.log(n_parent - 1) if tree_prior == "yule" else 0.0


@pytest.mark.parametrize("tree_prior", ["yule", "uniform"])
@pytest.mark.parametrize("affinity", ["rbf", "exponential", "precomputed"])
@pytest.mark.parametrize("beta", [0.0, 0.7, 3.0])
def test_dasgupta_split_potentials(affinity, beta, tree_prior, global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    X = rng.normal(size=(6, 2))
    if affinity == "precomputed":
        X = np.exp(-cdist(X, X))
        similarity = X.copy()
    else:
        distance = cdist(X, X, "sqeuclidean" if affinity == "rbf" else "euclidean")
        gamma = 1.0 / np.median(distance[np.triu_indices(6, 1)])
        similarity = np.exp(-gamma * distance)
    energy = Dasgupta(affinity=affinity, beta=beta, tree_prior=tree_prior)
    splits, values = _evaluate_all(energy.split_potential(X), 6)
    for (parent, left), value in zip(splits, values):
        a, b = _points(left, 6), _points(parent ^ left, 6)
        expected = (-beta * (len(a) + len(b)) * similarity[np.ix_(a, b)].sum()
                    + _log_tree_prior(tree_prior, len(a) + len(b)))
        assert value == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("tree_prior", ["yule", "uniform"])
@pytest.mark.parametrize("beta", [0.5, 2.0])
def test_hierarchical_correlation_clustering_split_potentials(beta, tree_prior,
                                                              global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    weights = rng.normal(size=(6, 6))
    weights = weights + weights.T
    energy = CorrelationClustering(affinity="precomputed", beta=beta, tree_prior=tree_prior)
    splits, values = _evaluate_all(energy.split_potential(weights), 6)
    for (parent, left), value in zip(splits, values):
        a, b = _points(left, 6), _points(parent ^ left, 6)
        cross = weights[np.ix_(a, b)]
        kept_negative = sum(
            -weights[i, j]
            for side in (a, b)
            for i, j in itertools.combinations(side, 2)
            if weights[i, j] < 0
        )
        expected = (-beta * (cross[cross > 0].sum() + kept_negative)
                    + _log_tree_prior(tree_prior, len(a) + len(b)))
        assert value == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("n_points", range(2, 8))
def test_yule_prior_is_the_yule_distribution_over_trees(n_points):
    """prod 1 / (|S| - 1) is 2**(1-N) N! times a distribution with lone root splits at 2 / (N - 1)."""
    trees = all_trees((1 << n_points) - 1)
    log_prior = np.array([
        sum(split_log_prior([bin(parent).count("1")], "yule")[0] for parent, _ in tree)
        for tree in trees])
    probability = np.exp(log_prior) * 2.0 ** (n_points - 1) / math.factorial(n_points)
    assert probability.sum() == pytest.approx(1.0, rel=1e-12)
    if n_points >= 3:
        full = (1 << n_points) - 1
        root_left = [next(left for parent, left in tree if parent == full) for tree in trees]
        lone = [bin(left).count("1") in (1, n_points - 1) for left in root_left]
        assert probability[lone].sum() == pytest.approx(2.0 / (n_points - 1), rel=1e-12)
        # The uniform measure's share, more than half: N / (2N - 3).
        assert np.mean(lone) == pytest.approx(n_points / (2 * n_points - 3), rel=1e-12)


def test_correlation_weights_from_features_are_centred():
    X = np.random.default_rng(0).normal(size=(7, 3))
    weights = CorrelationClustering().weights(X)
    off_diagonal = weights[~np.eye(7, dtype=bool)]
    assert off_diagonal.mean() == pytest.approx(0.0, abs=1e-12)
    assert np.all(np.diag(weights) == 0)
    distance = cdist(X, X)
    similarity = np.exp(-distance / np.median(distance[np.triu_indices(7, 1)]))
    np.testing.assert_allclose(
        off_diagonal, (similarity - similarity[~np.eye(7, dtype=bool)].mean())[~np.eye(7, dtype=bool)]
    )


def _ginkgo_naive(momenta, parent, left, lam, t_cut):
    def mass2(mask):
        if mask & (mask - 1) == 0:
            return 0.0
        p = momenta[_points(mask, len(momenta))].sum(axis=0)
        return p[0] ** 2 - p[1:] @ p[1:]

    def g(tau, t):
        if t > 0:
            return math.log(lam) - math.log(tau) - lam * t / tau - math.log(1 - math.exp(-lam))
        return math.log(1 - math.exp(-lam * t_cut / tau)) - math.log(1 - math.exp(-lam))

    t_p = mass2(parent)
    if t_p < t_cut:
        return -np.inf
    t_a, t_b = sorted([mass2(left), mass2(parent ^ left)], reverse=True)
    return g(t_p, t_a) + g((math.sqrt(t_p) - math.sqrt(t_a)) ** 2, t_b) - math.log(4 * math.pi)


@pytest.mark.parametrize("lam, t_cut", [(1.5, 16.0), (3.0, 4.0)])
def test_ginkgo_split_potentials(lam, t_cut, global_random_seed):
    momenta = make_jets(n_leaves=6, lam=lam, t_cut=t_cut, random_state=global_random_seed)[0].momenta
    splits, values = _evaluate_all(GinkgoLikelihood(lam=lam, t_cut=t_cut).split_potential(momenta), 6)
    assert np.isfinite(values).any()
    for (parent, left), value in zip(splits, values):
        assert value == pytest.approx(_ginkgo_naive(momenta, parent, left, lam, t_cut), abs=1e-10)


def test_split_energy_tabulates_the_user_function():
    calls = []

    def func(X, left, right, offset=0.0):
        calls.append(len(left))
        assert left.dtype == np.int64 and np.all(left & right == 0)
        assert np.all((left & -(left | right)) != 0), "left holds the lowest point"
        return offset + 0.001 * left - 0.01 * right

    energy = SplitEnergy(func, kw_args={"offset": 2.0})
    splits, values = _evaluate_all(energy.split_potential(np.zeros((5, 1))), 5)
    assert sum(calls) == len(splits) == (3**5 - 2 ** (5 + 1) + 1) // 2
    for (parent, left), value in zip(splits, values):
        assert value == pytest.approx(2.0 + 0.001 * left - 0.01 * (parent ^ left))


@pytest.mark.parametrize(
    "result, match",
    [(lambda n: np.zeros(n + 1), "one value per split"),
     (lambda n: np.full(n, np.nan), "NaN"),
     (lambda n: np.full(n, np.inf), r"\+inf")],
)
def test_split_energy_rejects_bad_user_output(result, match):
    energy = SplitEnergy(lambda X, left, right: result(len(left)))
    with pytest.raises(ValueError, match=match):
        energy.split_potential(np.zeros((4, 1)))


def test_energies_are_estimator_like():
    from sklearn.base import clone

    energy = Dasgupta(gamma=0.5, beta=2.0)
    assert clone(energy).get_params() == {"affinity": "rbf", "gamma": 0.5, "beta": 2.0,
                                          "tree_prior": "yule"}
    assert repr(GinkgoLikelihood(lam=2.0)) == "GinkgoLikelihood(lam=2.0)"


###############################################################################
# Extreme scales: the right answer or a ValueError that says what is out of range

def _tree_estimators():
    from sktrellis import ExactFlatClustering, ExactHierarchicalClustering, SparseTrellisClustering
    from sktrellis.baselines import BeamSearchHierarchicalClustering, GreedyHierarchicalClustering

    return [
        ExactHierarchicalClustering(), ExactFlatClustering(), SparseTrellisClustering(),
        BeamSearchHierarchicalClustering(), GreedyHierarchicalClustering(),
    ]


@pytest.mark.parametrize("scale", [1e155, 1e300, 1e-300])
@pytest.mark.parametrize("estimator", _tree_estimators(), ids=lambda e: type(e).__name__)
def test_feature_scale_changes_nothing_with_the_median_heuristic(estimator, scale):
    """Features of 1e155 gave KeyError, IndexError or NaN linkages.

    RBF similarities with the median-heuristic gamma are scale-free, so the
    fit on X * scale must equal the fit on X.
    """
    from sklearn.base import clone

    X = np.random.default_rng(0).normal(size=(8, 3))
    reference = clone(estimator).fit(X)
    scaled = clone(estimator).fit(X * scale)
    np.testing.assert_array_equal(scaled.labels_, reference.labels_)
    if hasattr(reference, "linkage_matrix_"):
        assert np.all(np.isfinite(scaled.linkage_matrix_))
        np.testing.assert_allclose(scaled.linkage_matrix_, reference.linkage_matrix_, rtol=1e-9)
    if hasattr(reference, "log_partition_"):
        assert scaled.log_partition_ == pytest.approx(reference.log_partition_, rel=1e-9)


@pytest.mark.parametrize("affinity", ["rbf", "exponential"])
def test_explicit_gamma_follows_the_feature_scale(affinity):
    """With a fixed gamma, X * 2**k and gamma / 4**k (rbf) give the same similarities."""
    from sktrellis.energies._affinity import similarity_matrix

    X = np.random.default_rng(1).normal(size=(6, 2))
    power = 2 if affinity == "rbf" else 1
    base = similarity_matrix(X, affinity, 0.7, allow_negative=False)
    for k in (-400, 450):
        scaled = similarity_matrix(np.ldexp(X, k), affinity, np.ldexp(0.7, -power * k),
                                   allow_negative=False)
        np.testing.assert_allclose(scaled, base, rtol=1e-12)
    # A huge gamma on huge features: similarities 0 off the diagonal, never NaN.
    huge = similarity_matrix(X * 1e155, affinity, 1.0, allow_negative=False)
    assert np.all(huge == 0.0)


@pytest.mark.parametrize(
    "energy, X, match",
    [
        (Dasgupta(affinity="precomputed"), np.full((4, 4), 1e307), "rescale the precomputed similarities"),
        (Dasgupta(beta=1e308), np.random.default_rng(0).normal(size=(4, 2)), "lower beta"),
        (CorrelationClustering(affinity="precomputed"), np.full((4, 4), -1e308), "rescale the precomputed weights"),
    ],
)
def test_values_out_of_float64_range_are_named(energy, X, match):
    # The Gaussian DPM is scale-free up to a Jacobian, so it answers at any
    # scale instead (tests/test_validation.py).
    from sktrellis import ExactHierarchicalClustering

    with pytest.raises(ValueError, match=match):
        ExactHierarchicalClustering(energy).fit(X)


@pytest.mark.parametrize("energy", [Dasgupta(), Dasgupta(affinity="exponential"),
                                    CorrelationClustering()])
@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_non_finite_features_are_named_not_reported_as_overflow(energy, value):
    """Dasgupta().split_potential on NaN data reported an overflow."""
    X = np.arange(6.0).reshape(3, 2)
    X[1, 0] = value
    with pytest.raises(ValueError, match=rf"X contains {value} at index \(1, 0\); the "
                                         r"'\w+' affinity needs finite features"):
        energy.split_potential(X)

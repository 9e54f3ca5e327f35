"""BestFirstHierarchicalClustering (issue 14): certified MAP trees by branch and bound."""
import numpy as np
import pytest
from sklearn.datasets import make_blobs
from sklearn.utils.estimator_checks import parametrize_with_checks

from sktrellis import ExactHierarchicalClustering
from sktrellis.energies import CorrelationClustering, Dasgupta
from sktrellis.search import BestFirstHierarchicalClustering, _DasguptaSearch


def _similarities(n_points, rng, structured):
    if structured:
        X, _ = make_blobs(n_samples=n_points, centers=3, cluster_std=0.7,
                          random_state=int(rng.integers(1000)))
    else:
        X = rng.normal(size=(n_points, 2))
    return X, Dasgupta().similarities(X)


@pytest.mark.parametrize("structured", [False, True])
@pytest.mark.parametrize("n_points", [4, 7, 10])
def test_triplet_bound_is_admissible_on_every_subset(n_points, structured, global_random_seed):
    """The bound never exceeds the best subtree cost (exact trellis), on all 2**N subsets."""
    rng = np.random.default_rng(global_random_seed + n_points)
    X, weights = _similarities(n_points, rng, structured)
    trellis = ExactHierarchicalClustering(Dasgupta(affinity="precomputed")).fit(weights)._trellis
    search = _DasguptaSearch(weights, 10**9, np.inf)
    for mask in range(1, 1 << n_points):
        best_cost = -trellis.log_map[mask]
        assert search.bound(mask) <= best_cost + 1e-9 * max(1.0, best_cost)


@pytest.mark.parametrize("n_points", [3, 6])
def test_splits_come_lazily_in_bound_order_each_once(n_points, global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    _, weights = _similarities(n_points, rng, False)
    search = _DasguptaSearch(weights, 10**9, np.inf)
    full = (1 << n_points) - 1
    splits = list(search.splits(full))
    bounds = [bound for bound, _, _, _ in splits]
    assert bounds == sorted(bounds)
    assert sorted(a for _, _, a, _ in splits) == [a for a in range(1, full, 2)]
    for bound, cut, a, b in splits:
        cross = sum(weights[i, j] for i in range(n_points) if a >> i & 1
                    for j in range(n_points) if b >> j & 1)
        assert cut == pytest.approx(n_points * cross)
        assert bound == pytest.approx(cut + search.bound(a) + search.bound(b))


@pytest.mark.parametrize("structured", [False, True])
@pytest.mark.parametrize("n_points", [2, 5, 8, 11])
def test_search_finds_the_trellis_map(n_points, structured, global_random_seed):
    rng = np.random.default_rng(global_random_seed + 10 * n_points)
    X, _ = _similarities(n_points, rng, structured)
    energy = Dasgupta(beta=float(rng.uniform(0.5, 2.0)))
    exact = ExactHierarchicalClustering(energy).fit(X)
    model = BestFirstHierarchicalClustering(energy, beam_width=1).fit(X)
    assert model.optimality_gap_ == 0.0
    assert model.map_log_potential_ == pytest.approx(exact.map_log_potential_, rel=1e-10)
    # The reported tree has the reported potential.
    assert exact.log_probability(model.linkage_matrix_) + exact.log_partition_ == pytest.approx(
        model.map_log_potential_, rel=1e-10
    )


@pytest.mark.parametrize("max_clusters", [1, 3])
def test_an_interrupted_search_certifies_its_gap(max_clusters, global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    X = rng.normal(size=(11, 2))
    exact = ExactHierarchicalClustering().fit(X)
    model = BestFirstHierarchicalClustering(max_clusters=max_clusters, beam_width=1).fit(X)
    assert model.n_expanded_ <= max_clusters + 1
    assert model.optimality_gap_ >= 0.0
    assert model.map_log_potential_ <= exact.map_log_potential_ + 1e-9
    # The certificate: the MAP is within the gap of the tree returned.
    assert exact.map_log_potential_ <= model.map_log_potential_ + model.optimality_gap_ + 1e-9


@pytest.mark.parametrize(
    "params, X, match",
    [
        ({"energy": CorrelationClustering()}, np.zeros((4, 2)), "energy"),
        ({}, np.random.default_rng(0).normal(size=(257, 2)), "n_samples=257.*SparseTrellis"),
        ({"max_time": 0.0}, np.zeros((4, 2)), "max_time"),
    ],
)
def test_bad_input_is_refused(params, X, match):
    with pytest.raises(ValueError, match=match):
        BestFirstHierarchicalClustering(**params).fit(X)


@pytest.mark.slow
@parametrize_with_checks(
    [BestFirstHierarchicalClustering(max_time=None, max_clusters=2)],
    expected_failed_checks=lambda estimator: {},
)
def test_sklearn_common_checks(estimator, check):
    check(estimator)

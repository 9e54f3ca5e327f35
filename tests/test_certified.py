"""CertifiedFlatClustering against the exact flat trellis, and its anytime certificate."""
import warnings

import numpy as np
import pytest
from sklearn.datasets import make_blobs
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import adjusted_rand_score

from sktrellis import CertifiedFlatClustering, ExactFlatClustering
from sktrellis._engine.multicut import (
    greedy_agglomeration,
    greedy_partition,
    improve_by_moves,
    partition_objective,
)
from sktrellis.baselines import TransitivePropagation
from sktrellis.datasets import make_bit_patterns
from sktrellis.energies import CorrelationClustering, Dasgupta

from .common import all_partitions, partition_log_potentials


def _signed_weights(n_points, rng, kind):
    """Random symmetric signed weights, zero diagonal, of a few kinds."""
    if kind == "gaussian":
        weights = rng.normal(size=(n_points, n_points))
    elif kind == "sparse":
        # Many zero pairs, so ties and separate positive components.
        weights = rng.normal(size=(n_points, n_points)) * (rng.random((n_points, n_points)) < 0.3)
    elif kind == "integer":
        # Exact ties between partitions.
        weights = rng.integers(-2, 3, size=(n_points, n_points)).astype(float)
    else:
        raise ValueError(kind)
    weights = np.triu(weights, 1)
    return weights + weights.T


def _log_potential(weights, labels, beta):
    return beta * partition_objective(weights, np.asarray(labels))


def _fit_quietly(model, X):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.fit(X)


@pytest.mark.parametrize("kind", ["gaussian", "sparse", "integer"])
@pytest.mark.parametrize("n_points", [1, 2, 3, 5, 8, 10, pytest.param(12, marks=pytest.mark.slow)])
def test_map_equals_the_exact_trellis(kind, n_points, global_random_seed):
    rng = np.random.default_rng(global_random_seed + 100 * n_points)
    for _ in range(4):
        weights = _signed_weights(n_points, rng, kind)
        beta = float(rng.choice([0.3, 1.0, 2.5]))
        energy = CorrelationClustering(affinity="precomputed", beta=beta)
        exact = ExactFlatClustering(energy, verbose=0).fit(weights)
        model = CertifiedFlatClustering(energy).fit(weights)
        assert model.map_log_potential_ == pytest.approx(
            exact.map_log_potential_, rel=1e-9, abs=1e-9
        )
        # Certificate: the labels have the potential reported, and it is proven.
        assert _log_potential(weights, model.labels_, beta) == pytest.approx(
            model.map_log_potential_, rel=1e-12, abs=1e-12
        )
        assert model.optimality_gap_ == 0.0
        assert model.log_potential_upper_bound_ == model.map_log_potential_
        assert model.stop_reason_ == "optimal"
        assert model.beta_ == beta


def test_map_equals_brute_force_over_all_partitions(global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    n_points = 7
    weights = _signed_weights(n_points, rng, "gaussian")
    energy = CorrelationClustering(affinity="precomputed", beta=1.0)
    values = partition_log_potentials(energy.cluster_potential(weights), all_partitions(n_points))
    model = CertifiedFlatClustering(energy).fit(weights)
    assert model.map_log_potential_ == pytest.approx(values.max(), rel=1e-12, abs=1e-12)


@pytest.mark.parametrize(
    "n_points",
    # Dense random weights are the integer program's hard case: up to 7 s at
    # 16 and 9 s at 18 (seeds 0-5, loaded machine).
    [14, pytest.param(16, marks=pytest.mark.slow), pytest.param(18, marks=pytest.mark.slow)],
)
def test_map_equals_the_exact_trellis_past_a_dozen_points(n_points, global_random_seed):
    rng = np.random.default_rng(global_random_seed + n_points)
    weights = _signed_weights(n_points, rng, "gaussian")
    energy = CorrelationClustering(affinity="precomputed", beta=1.0)
    exact = ExactFlatClustering(energy, verbose=0).fit(weights)
    model = CertifiedFlatClustering(energy).fit(weights)
    assert model.map_log_potential_ == pytest.approx(exact.map_log_potential_, rel=1e-9)
    assert model.optimality_gap_ == 0.0


def test_features_with_the_default_energy_match_the_exact_trellis(global_random_seed):
    """From features: the energy's own weights (exponential similarities minus their mean)."""
    rng = np.random.default_rng(global_random_seed)
    X = rng.normal(size=(11, 3))
    energy = CorrelationClustering(beta=2.0)
    exact = ExactFlatClustering(energy, verbose=0).fit(X)
    model = CertifiedFlatClustering(energy).fit(X)
    assert model.map_log_potential_ == pytest.approx(exact.map_log_potential_, rel=1e-9)
    assert np.array_equal(model.fit_predict(X), model.labels_)


@pytest.mark.parametrize("budget", [{"max_iter": 1}, {"max_iter": 2}, {"max_time": 1e-9}])
def test_a_stopped_solve_brackets_the_exact_map(budget, global_random_seed):
    """Whatever stops the solver, the exact MAP lies in
    [map_log_potential_, log_potential_upper_bound_].

    No wall clock: a budget of 1e-9 s is spent before the first program
    whatever the machine's speed, and max_iter counts programs.
    """
    rng = np.random.default_rng(global_random_seed)
    for _ in range(5):
        weights = _signed_weights(12, rng, "gaussian")
        energy = CorrelationClustering(affinity="precomputed", beta=1.5)
        exact = ExactFlatClustering(energy, verbose=0).fit(weights)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model = CertifiedFlatClustering(energy, **budget).fit(weights)
        proven = model.optimality_gap_ == 0.0
        warned = [w for w in caught if issubclass(w.category, ConvergenceWarning)]
        assert len(warned) == (not proven)
        if not proven:
            assert model.stop_reason_ == next(iter(budget))
            assert "before proving the partition optimal" in str(warned[0].message)
        assert _log_potential(weights, model.labels_, 1.5) == pytest.approx(
            model.map_log_potential_, rel=1e-12, abs=1e-12
        )
        assert model.optimality_gap_ >= 0.0
        assert model.map_log_potential_ <= exact.map_log_potential_ + 1e-9
        assert model.log_potential_upper_bound_ >= exact.map_log_potential_ - 1e-9
        if "max_iter" in budget:
            assert model.n_iter_ <= budget["max_iter"]
        else:
            assert model.n_iter_ == 0


def test_the_gap_closes_with_more_programs(global_random_seed):
    """The upper bound never rises and the incumbent never falls as max_iter grows."""
    rng = np.random.default_rng(global_random_seed)
    weights = _signed_weights(14, rng, "gaussian")
    energy = CorrelationClustering(affinity="precomputed", beta=1.0)
    bounds, incumbents = [], []
    for max_iter in [1, 2, 4, 8, 1000]:
        model = _fit_quietly(CertifiedFlatClustering(energy, max_iter=max_iter), weights)
        bounds.append(model.log_potential_upper_bound_)
        incumbents.append(model.map_log_potential_)
    assert np.all(np.diff(bounds) <= 1e-9)
    assert np.all(np.diff(incumbents) >= -1e-9)
    assert model.optimality_gap_ == 0.0


def test_transitive_propagation_ratios_are_solved_exactly():
    """The K-populations data: TP's objective, our optimum, the trellis's at small N."""
    _, truth, llr = make_bit_patterns(4, reads_per_template=3, error_rate=0.12, random_state=3)
    energy = CorrelationClustering(affinity="precomputed", beta=1.0)
    exact = ExactFlatClustering(energy, verbose=0).fit(llr)
    model = CertifiedFlatClustering(energy).fit(llr)
    assert model.map_log_potential_ == pytest.approx(exact.map_log_potential_, rel=1e-9)

    _, truth, llr = make_bit_patterns(15, reads_per_template=4, error_rate=0.1, random_state=0)
    model = CertifiedFlatClustering(energy).fit(llr)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tp = TransitivePropagation().fit(llr)
    assert model.optimality_gap_ == 0.0
    assert model.map_log_potential_ >= tp.objective_ - 1e-9
    assert model.map_log_potential_ >= partition_objective(llr, greedy_partition(llr)) - 1e-9
    assert adjusted_rand_score(truth, model.labels_) > 0.8


def test_defaults_on_labelled_and_structureless_data():
    X, y = make_blobs(n_samples=40, centers=3, cluster_std=0.5, random_state=0)
    model = CertifiedFlatClustering().fit(X)
    assert model.optimality_gap_ == 0.0
    assert adjusted_rand_score(y, model.labels_) == 1.0
    assert model.beta_ == 1.0

    noise = np.random.default_rng(0).uniform(size=(30, 2))
    model = _fit_quietly(CertifiedFlatClustering(max_time=30), noise)
    assert model.labels_.shape == (30,)
    assert model.map_log_potential_ >= _log_potential(
        CorrelationClustering().weights(noise), np.zeros(30), 1.0
    )
    assert model.optimality_gap_ >= 0.0


def test_helpers_never_lose_objective(global_random_seed):
    """Single-point moves only improve; greedy merges end at no positive merge."""
    rng = np.random.default_rng(global_random_seed)
    weights = _signed_weights(20, rng, "gaussian")
    start = rng.integers(0, 4, size=20)
    moved = improve_by_moves(weights, start)
    assert partition_objective(weights, moved) >= partition_objective(weights, start)
    labels = greedy_partition(weights)
    for a in range(labels.max() + 1):
        for b in range(a + 1, labels.max() + 1):
            assert weights[np.ix_(labels == a, labels == b)].sum() <= 1e-12


@pytest.mark.parametrize("kind", ["gaussian", "sparse", "integer"])
@pytest.mark.parametrize("n_points", [1, 2, 5, 30])
def test_greedy_partition_is_a_cut_of_the_greedy_tree(kind, n_points, global_random_seed):
    """The greedy tree is a full tree; its partition is one of its cuts, with no positive merge."""
    rng = np.random.default_rng(global_random_seed)
    weights = _signed_weights(n_points, rng, kind)
    merges, labels = greedy_agglomeration(weights)
    assert merges.shape == (max(n_points - 1, 0), 2)
    members = [{i} for i in range(n_points)]
    for a, b in merges:
        # Children exist before their parent and each node is used once.
        assert max(a, b) < len(members) and members[a] and members[b]
        members.append(members[a] | members[b])
        members[a] = members[b] = None
    assert n_points < 2 or members[-1] == set(range(n_points))
    tree_clusters = {frozenset(m) for m in _all_members(merges, n_points)}
    for label in np.unique(labels):
        assert frozenset(np.flatnonzero(labels == label).tolist()) in tree_clusters
    for a in range(labels.max() + 1):
        for b in range(a + 1, labels.max() + 1):
            assert weights[np.ix_(labels == a, labels == b)].sum() <= 1e-12
    np.testing.assert_array_equal(greedy_partition(weights), labels)


def _all_members(merges, n_points):
    members = [{i} for i in range(n_points)]
    for a, b in merges:
        members.append(members[a] | members[b])
    return members


def test_input_is_not_mutated(global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    weights = _signed_weights(9, rng, "gaussian")
    copy = weights.copy()
    CertifiedFlatClustering(CorrelationClustering(affinity="precomputed")).fit(weights)
    assert np.array_equal(weights, copy)


@pytest.mark.parametrize(
    "params, X, error, match",
    [
        ({"energy": Dasgupta()}, np.zeros((4, 2)), ValueError, "energy.*weights"),
        ({"energy": CorrelationClustering}, np.zeros((4, 2)), TypeError, "pass an instance"),
        ({"max_time": 0}, np.zeros((4, 2)), ValueError, "max_time"),
        ({"max_iter": 0}, np.zeros((4, 2)), ValueError, "max_iter"),
        ({"energy": CorrelationClustering(affinity="precomputed")}, np.zeros((4, 3)),
         ValueError, "square"),
    ],
)
def test_bad_input_is_refused(params, X, error, match):
    with pytest.raises(error, match=match):
        CertifiedFlatClustering(**params).fit(X)

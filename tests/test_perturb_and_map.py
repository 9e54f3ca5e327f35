"""PerturbAndMAPClustering against brute-force perturbed MAPs and the exact marginals."""
import pickle

import numpy as np
import pytest
from scipy.special import expit
from sklearn.base import clone
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import InvalidParameterError

from sktrellis._engine.resources import MAX_EXACT_POINTS
from sktrellis.baselines import PerturbAndMAPClustering
from sktrellis.baselines._perturb_and_map import perturbations
from sktrellis.energies import CorrelationClustering
from sktrellis import ExactFlatClustering

from .common import all_partitions


def _random_weights(n_points, rng, scale=1.0):
    weights = rng.normal(scale=scale, size=(n_points, n_points))
    return weights + weights.T


def _pair_sums(partitions, pair_weights):
    """Sum of the pair weights (i < j, triu order) inside each partition's clusters.

    ``pair_weights`` of shape (n_pairs,) or (n_draws, n_pairs) gives one
    score per partition, or per draw and partition.
    """
    n_points = partitions.shape[1]
    upper, lower = np.triu_indices(n_points, 1)
    together = partitions[:, upper] == partitions[:, lower]
    return pair_weights @ together.T


def _brute_force_draws(weights, beta, n_draws, seed):
    """Each draw's perturbed MAP partition and value, over all Bell(N) partitions."""
    n_points = len(weights)
    partitions = all_partitions(n_points)
    upper, lower = np.triu_indices(n_points, 1)
    rng = check_random_state(seed)
    labels, values = [], []
    for _ in range(n_draws):
        same, different = perturbations(len(upper), rng)
        scores = _pair_sums(partitions, beta * weights[upper, lower] + same - different)
        best = np.argmax(scores)
        labels.append(partitions[best])
        values.append(scores[best] + different.sum())
    return np.array(labels), np.array(values)


def _exact(weights, beta):
    energy = CorrelationClustering(affinity="precomputed", beta=beta)
    return ExactFlatClustering(energy, n_jobs=1).fit(weights)


@pytest.mark.parametrize("n_points", [1, 2, 5, 8])
@pytest.mark.parametrize("beta", [0.0, 0.7, 3.0])
def test_pairwise_probability_is_a_co_clustering_frequency(n_points, beta, global_random_seed):
    rng = np.random.default_rng(global_random_seed + n_points)
    weights = _random_weights(n_points, rng)
    model = PerturbAndMAPClustering(beta=beta, n_perturbations=30, random_state=0, n_jobs=1)
    model.fit(weights)
    probability = model.pairwise_probability_
    assert probability.shape == (n_points, n_points)
    np.testing.assert_array_equal(probability, probability.T)
    np.testing.assert_array_equal(np.diag(probability), 1.0)
    np.testing.assert_array_equal(probability * 30, np.round(probability * 30))
    assert model.perturbed_labels_.shape == (30, n_points)
    together = model.perturbed_labels_[:, :, None] == model.perturbed_labels_[:, None, :]
    np.testing.assert_array_equal(probability, together.mean(axis=0))
    np.testing.assert_array_equal(model.labels_, _exact(weights, beta).labels_)


@pytest.mark.parametrize("n_points", [3, 5, 7])
def test_each_draw_is_the_exact_map_of_its_perturbation(n_points, global_random_seed):
    """Certificate: the same noise, maximised over every partition by enumeration."""
    rng = np.random.default_rng(global_random_seed + 10 * n_points)
    weights = _random_weights(n_points, rng)
    model = PerturbAndMAPClustering(beta=1.3, n_perturbations=25, random_state=global_random_seed)
    model.fit(weights)
    labels, values = _brute_force_draws(weights, 1.3, 25, global_random_seed)
    np.testing.assert_array_equal(model.perturbed_labels_, labels)
    assert model.log_partition_upper_bound_ == pytest.approx(values.mean(), rel=1e-12)


def test_the_same_seed_gives_the_same_estimate(global_random_seed):
    weights = _random_weights(6, np.random.default_rng(global_random_seed))
    fits = [
        PerturbAndMAPClustering(n_perturbations=40, random_state=seed).fit(weights)
        for seed in (global_random_seed, global_random_seed, global_random_seed + 1)
    ]
    np.testing.assert_array_equal(fits[0].perturbed_labels_, fits[1].perturbed_labels_)
    np.testing.assert_array_equal(fits[0].pairwise_probability_, fits[1].pairwise_probability_)
    assert fits[0].log_partition_upper_bound_ == fits[1].log_partition_upper_bound_
    assert not np.array_equal(fits[0].perturbed_labels_, fits[2].perturbed_labels_)


@pytest.mark.parametrize("weight", [-2.0, 0.0, 0.8, 3.0])
@pytest.mark.parametrize("beta", [pytest.param(0.5, marks=pytest.mark.slow), 1.0])
def test_two_points_are_exact(weight, beta, global_random_seed):
    """One pair: the Gumbel-max trick, so P(together) = sigmoid(beta w) and the bound is log Z."""
    n_draws = 4000
    weights = np.array([[0.0, weight], [weight, 0.0]])
    model = PerturbAndMAPClustering(beta=beta, n_perturbations=n_draws, random_state=global_random_seed)
    model.fit(weights)
    expected = expit(beta * weight)
    # Five binomial standard errors (two-sided p ~ 6e-7).
    assert abs(model.pairwise_probability_[0, 1] - expected) <= 5 * np.sqrt(
        expected * (1 - expected) / n_draws
    )
    # The perturbed MAP value is a maximum of two Gumbels: its standard
    # deviation is pi / sqrt(6), so five standard errors are 0.1 here.
    assert model.log_partition_upper_bound_ == pytest.approx(
        np.logaddexp(0.0, beta * weight), abs=5 * np.pi / np.sqrt(6 * n_draws)
    )


@pytest.mark.parametrize("n_points", [3, pytest.param(4, marks=pytest.mark.slow)])
def test_estimate_converges_to_the_perturb_and_map_distribution(n_points, global_random_seed):
    """The estimate is unbiased for P&M's own co-clustering probabilities.

    The reference is an independent vectorised simulation: 200,000 draws of
    logistic pair noise, maximised over all partitions by enumeration.
    """
    rng = np.random.default_rng(global_random_seed + n_points)
    weights = _random_weights(n_points, rng, scale=0.7)
    upper, lower = np.triu_indices(n_points, 1)
    noise = rng.logistic(size=(200_000, len(upper)))
    partitions = all_partitions(n_points)
    best = partitions[np.argmax(_pair_sums(partitions, weights[upper, lower] + noise), axis=1)]
    reference = (best[:, upper] == best[:, lower]).mean(axis=0)
    n_draws = 3000
    model = PerturbAndMAPClustering(n_perturbations=n_draws, random_state=global_random_seed)
    estimate = model.fit(weights).pairwise_probability_[upper, lower]
    spread = np.sqrt(reference * (1 - reference) * (1 / n_draws + 1 / 200_000))
    assert np.all(np.abs(estimate - reference) <= 5 * spread + 1e-12)


def test_perturb_and_map_overestimates_the_uniform_marginal():
    """The known bias: with zero weights the exact P(i ~ j) is Bell(2) / Bell(3) = 2 / 5.

    One logistic perturbation per pair rather than one Gumbel per partition
    gives about 0.46 instead (0.459 in 10**6 simulated draws).
    """
    n_draws = 4000
    model = PerturbAndMAPClustering(n_perturbations=n_draws, random_state=0).fit(np.zeros((3, 3)))
    np.testing.assert_allclose(_exact(np.zeros((3, 3)), 1.0).pairwise_probability_[0, 1], 0.4)
    estimate = model.pairwise_probability_[np.triu_indices(3, 1)]
    error = 5 * np.sqrt(0.46 * 0.54 / n_draws)
    assert np.all(np.abs(estimate - 0.459) <= error)
    assert np.all(estimate > 0.4 + error)


@pytest.mark.parametrize("n_points", [5, 7])
def test_close_to_the_exact_marginals_of_random_weights(n_points, global_random_seed):
    """Monte-Carlo error (< 0.02 at 2,000 draws) plus P&M's bias.

    Over 20 random problems of N = 6 with unit-variance weights the largest
    absolute error was 0.10-0.25 and the mean 0.05-0.16 (benchmarks/README.md).
    """
    weights = _random_weights(n_points, np.random.default_rng(global_random_seed))
    model = PerturbAndMAPClustering(n_perturbations=2000, random_state=global_random_seed)
    model.fit(weights)
    exact = _exact(weights, 1.0)
    off = ~np.eye(n_points, dtype=bool)
    error = np.abs(model.pairwise_probability_ - exact.pairwise_probability_)[off]
    assert error.max() < 0.35 and error.mean() < 0.2
    # The bound holds in expectation; the draws' mean is within Monte-Carlo
    # error of a value at least log Z (the sum of N (N - 1) / 2 Gumbels has
    # a standard deviation of about 1.3 * sqrt(N (N - 1) / 2)).
    standard_error = 1.3 * np.sqrt(n_points * (n_points - 1) / 2 / 2000)
    assert model.log_partition_upper_bound_ >= exact.log_partition_ - 5 * standard_error


@pytest.mark.parametrize("beta", [20.0, 200.0])
def test_strong_weights_leave_the_map_partition(beta, global_random_seed):
    """Noise-free limit: with |beta w| >> 1 every draw is the MAP, as is the exact posterior."""
    truth = np.array([0, 1, 0, 2, 1, 1, 0])
    weights = np.where(truth[:, None] == truth[None, :], 1.0, -1.0)
    model = PerturbAndMAPClustering(beta=beta, n_perturbations=50, random_state=global_random_seed)
    model.fit(weights)
    together = (truth[:, None] == truth[None, :]).astype(float)
    np.testing.assert_array_equal(model.pairwise_probability_, together)
    np.testing.assert_allclose(_exact(weights, beta).pairwise_probability_, together, atol=1e-6)
    np.testing.assert_array_equal(model.labels_, [0, 1, 0, 2, 1, 1, 0])


def test_input_is_not_mutated(global_random_seed):
    weights = _random_weights(5, np.random.default_rng(global_random_seed))
    weights[np.diag_indices(5)] = 3.0
    copy = weights.copy()
    model = PerturbAndMAPClustering(n_perturbations=5, random_state=0).fit(weights)
    np.testing.assert_array_equal(weights, copy)
    # The diagonal is ignored.
    weights[np.diag_indices(5)] = 0.0
    again = PerturbAndMAPClustering(n_perturbations=5, random_state=0).fit(weights)
    np.testing.assert_array_equal(model.perturbed_labels_, again.perturbed_labels_)


@pytest.mark.parametrize(
    "X, message",
    [
        (np.zeros((3, 2)), "must be square"),
        (np.array([[0.0, 1.0], [2.0, 0.0]]), "must be symmetric"),
        (np.array([[0.0, np.nan], [np.nan, 0.0]]), "NaN"),
        (np.array([[0.0, np.inf], [np.inf, 0.0]]), "infinity"),
        (np.full((3, 3), 1e308), "overflow.*rescale X or lower beta"),
        (np.zeros((MAX_EXACT_POINTS + 1,) * 2),
         f"n_samples={MAX_EXACT_POINTS + 1}.*TransitivePropagation"),
    ],
)
def test_bad_input_is_rejected(X, message):
    with pytest.raises(ValueError, match=message):
        PerturbAndMAPClustering(n_perturbations=1).fit(X)


@pytest.mark.parametrize(
    "params, message",
    [
        ({"beta": -1.0}, "beta"),
        ({"n_perturbations": 0}, "n_perturbations"),
        ({"n_perturbations": 2.5}, "n_perturbations"),
        ({"random_state": "seed"}, "random_state"),
    ],
)
def test_bad_parameters_are_rejected(params, message):
    with pytest.raises(InvalidParameterError, match=message):
        PerturbAndMAPClustering(**params).fit(np.zeros((3, 3)))


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64])
def test_what_the_large_common_checks_cover_at_small_n(dtype, global_random_seed):
    """Fit returns self, is idempotent, pickles, takes any numeric dtype, keeps its params."""
    weights = np.round(3 * _random_weights(6, np.random.default_rng(global_random_seed)))
    model = PerturbAndMAPClustering(n_perturbations=10, random_state=3)
    params = model.get_params()
    assert model.fit(weights.astype(dtype)) is model
    assert model.get_params() == params and model.n_features_in_ == 6
    first = model.pairwise_probability_.copy()
    np.testing.assert_array_equal(model.fit(weights).pairwise_probability_, first)
    restored = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(restored.perturbed_labels_, model.perturbed_labels_)
    np.testing.assert_array_equal(model.fit_predict(weights), model.labels_)
    np.testing.assert_array_equal(
        clone(model).fit(np.asfortranarray(weights)).pairwise_probability_, first
    )



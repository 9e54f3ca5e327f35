"""Datasets: the toy parton shower and the bundled iris subset."""
import numpy as np
import pytest
from scipy.stats import kstest

from sktrellis import ExactHierarchicalClustering
from sktrellis.datasets import _truncated_exponential, load_iris12, make_jets
from sktrellis.energies import GinkgoLikelihood


@pytest.mark.parametrize("n_leaves", [2, 5, 8])
def test_jets_conserve_momentum_and_score_their_true_tree(n_leaves, global_random_seed):
    jets = make_jets(3, n_leaves=n_leaves, random_state=global_random_seed)
    root = np.array([np.sqrt(900.0 + 400.0**2)] + [400.0 / np.sqrt(3.0)] * 3)
    for jet in jets:
        assert jet.momenta.shape == (n_leaves, 4)
        np.testing.assert_allclose(jet.momenta.sum(axis=0), root, rtol=1e-10)
        # Leaves are massless: E == |p|.
        np.testing.assert_allclose(
            jet.momenta[:, 0], np.linalg.norm(jet.momenta[:, 1:], axis=1), rtol=1e-8
        )
        model = ExactHierarchicalClustering(GinkgoLikelihood()).fit(jet.momenta)
        truth = model.log_probability(jet.linkage) + model.log_partition_
        assert truth == pytest.approx(jet.log_likelihood, abs=1e-8)
        assert model.map_log_potential_ >= jet.log_likelihood - 1e-9


def test_mass_draws_follow_the_truncated_exponential():
    rng = np.random.RandomState(0)
    lam, scale = 1.5, 900.0
    draws = np.array([_truncated_exponential(scale, lam, rng) for _ in range(4000)])
    cdf = lambda t: (1 - np.exp(-lam * t / scale)) / (1 - np.exp(-lam))  # noqa: E731
    assert np.all((draws >= 0) & (draws <= scale))
    assert kstest(draws, cdf).pvalue > 1e-3


def test_jets_are_reproducible_and_errors_are_clear():
    a = make_jets(2, random_state=3)
    b = make_jets(2, random_state=3)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x.momenta, y.momenta)
    with pytest.raises(ValueError, match="n_leaves=30"):
        make_jets(n_leaves=30, max_tries=5, random_state=0)
    with pytest.raises(ValueError, match="n_leaves"):
        make_jets(n_leaves=1)


def test_bundled_iris_subset():
    iris = load_iris12()
    assert iris.data.shape == (12, 4)
    assert np.bincount(iris.target).tolist() == [4, 4, 4]
    assert list(iris.target_names) == ["setosa", "versicolor", "virginica"]

"""Datasets: the toy parton shower and the bundled iris subset."""
import numpy as np
import pytest
from scipy.stats import kstest

from sktrellis import ExactHierarchicalClustering
from sktrellis.datasets import (
    _leaf_count,
    _truncated_exponential,
    load_iris12,
    make_jets,
    make_planted_subtypes,
)
from sktrellis.energies import GinkgoLikelihood


@pytest.mark.parametrize("n_leaves", [2, 5, 8])
def test_jets_conserve_momentum_and_score_their_true_tree(n_leaves, global_random_seed):
    jets = make_jets(3, n_leaves=n_leaves, random_state=global_random_seed)
    root = np.array([np.sqrt(900.0 + 400.0**2)] + [400.0 / np.sqrt(3.0)] * 3)
    for jet in jets:
        # Small sizes keep the published root mass.
        assert jet.root_mass2 == 900.0
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
    with pytest.raises(ValueError, match="n_leaves=30 in 5 showers of root_mass2=900"):
        make_jets(n_leaves=30, root_mass2=900.0, max_tries=5, random_state=0)
    with pytest.raises(ValueError, match="root_mass2=10.0 is below t_cut=16.0"):
        make_jets(root_mass2=10.0)
    with pytest.raises(ValueError, match="n_leaves"):
        make_jets(n_leaves=1)


def test_bundled_iris_subset():
    iris = load_iris12()
    assert iris.data.shape == (12, 4)
    assert np.bincount(iris.target).tolist() == [4, 4, 4]
    assert list(iris.target_names) == ["setosa", "versicolor", "virginica"]


@pytest.mark.parametrize("n_leaves", [13, 20, 30, 45, pytest.param(64, marks=pytest.mark.slow)])
def test_any_requested_size_is_returned(n_leaves, global_random_seed):
    """Past the published sizes the root mass is chosen for the size: exact sizes, valid jets."""
    jets = make_jets(2, n_leaves=n_leaves, random_state=global_random_seed)
    for jet in jets:
        assert jet.momenta.shape == (n_leaves, 4)
        assert jet.root_mass2 > 900.0
        root = np.array([np.sqrt(jet.root_mass2 + 400.0**2)] + [400.0 / np.sqrt(3.0)] * 3)
        np.testing.assert_allclose(jet.momenta.sum(axis=0), root, rtol=1e-9)
        assert jet.linkage.shape == (n_leaves - 1, 4)
        # The linkage is a tree over all the particles.
        assert sorted(jet.linkage[:, :2].ravel().astype(int)) == list(range(2 * n_leaves - 2))


def test_sizes_are_the_showers_own_not_truncated(global_random_seed):
    """Without n_leaves, sizes follow the shower (independent mass-only draws), past 32."""
    rng = np.random.RandomState(global_random_seed)
    root_mass2 = 2e5
    sizes = np.array([len(jet.momenta) for jet in
                      make_jets(150, root_mass2=root_mass2, random_state=global_random_seed)])
    reference = np.array([_leaf_count(root_mass2, 1.5, 16.0, rng) for _ in range(600)])
    assert sizes.max() > 32
    spread = np.sqrt(sizes.var() / len(sizes) + reference.var() / len(reference))
    assert abs(sizes.mean() - reference.mean()) < 4 * spread


def test_large_jets_score_their_true_tree():
    """The linkage is the true tree past 32 particles: its splits give the log likelihood."""
    from sktrellis.energies._ginkgo import ginkgo_log_psi

    jet = make_jets(n_leaves=40, random_state=0)[0]
    n_leaves = len(jet.momenta)
    momenta = list(jet.momenta)

    def mass2(p):
        return p[0] ** 2 - p[1:] @ p[1:]

    total = 0.0
    for k, (a, b) in enumerate(jet.linkage[:, :2].astype(int)):
        t_a = mass2(momenta[a]) if a >= n_leaves else 0.0
        t_b = mass2(momenta[b]) if b >= n_leaves else 0.0
        momenta.append(momenta[a] + momenta[b])
        total += float(ginkgo_log_psi(mass2(momenta[-1]), t_a, t_b, 1.5, 16.0))
    assert total == pytest.approx(jet.log_likelihood, rel=1e-9)


@pytest.mark.parametrize("n_samples, n_subtypes", [(14, 3), (7, 3), (5, 5), (2, 3)])
def test_planted_subtypes_mark_their_own_genes(n_samples, n_subtypes, global_random_seed):
    X, y = make_planted_subtypes(n_samples, 400, n_subtypes=n_subtypes, n_marked=40,
                                 shift=5.0, random_state=global_random_seed)
    assert X.shape == (n_samples, 400) and y.shape == (n_samples,)
    sizes = np.bincount(y, minlength=n_subtypes)
    assert sizes.sum() == n_samples and sizes.max() - sizes.min() <= 1
    assert np.all(np.diff(y) >= 0) and np.all(np.diff(sizes) <= 0)   # larger subtypes first
    # A shift of 5 noise-SDs: within a subtype its marked genes are the
    # ones that stand out from the other samples' mean.
    for subtype in np.unique(y):
        others = X[y != subtype].mean(axis=0) if np.any(y != subtype) else X.mean(axis=0)
        gap = np.abs(X[y == subtype].mean(axis=0) - others)
        if np.any(y != subtype):
            assert np.sum(gap > 2.5) >= 40 * 0.9
    again, _ = make_planted_subtypes(n_samples, 400, n_subtypes=n_subtypes, n_marked=40,
                                     shift=5.0, random_state=global_random_seed)
    assert np.array_equal(X, again)


def test_planted_subtypes_refuse_more_marked_genes_than_genes():
    with pytest.raises(ValueError, match="n_marked=11 .* n_features=10"):
        make_planted_subtypes(5, 10, n_marked=11)
    with pytest.raises(ValueError, match="shift"):
        make_planted_subtypes(5, 10, n_marked=2, shift=-1.0)

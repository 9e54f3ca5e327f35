"""Inputs at the edges of float64: the answer of the same data at unit scale, or a clear error.

Complements tests/test_fuzz.py (which checks that every fit gives a finite
model or a ValueError/TypeError) with the stronger property where it holds:
models that are invariant to the scale of the features give the same
clusters, and the same log Z up to the known Jacobian, at 1e-300 and 1e300.
"""
import warnings

import numpy as np
import pytest

from sktrellis import ExactFlatClustering, ExactHierarchicalClustering, SparseTrellisClustering
from sktrellis.baselines import (
    BayesianHierarchicalClustering,
    BeamSearchHierarchicalClustering,
    GreedyHierarchicalClustering,
    TransitivePropagation,
)
from sktrellis.energies import (
    CorrelationClustering,
    Dasgupta,
    DirichletProcessMixture,
    GinkgoLikelihood,
)


def _check_outputs(estimator):
    for name, value in vars(estimator).items():
        if name.endswith("_") and not name.startswith("_"):
            if isinstance(value, np.ndarray) and value.dtype.kind == "f":
                assert not np.isnan(value).any(), f"{name} has NaN"
            elif isinstance(value, float):
                assert not np.isnan(value), f"{name} is NaN"


###############################################################################
# Reproductions of overflows at extreme scales: overflow gives the right answer or a clear error

FEATURE_ESTIMATORS = [
    lambda: ExactHierarchicalClustering(n_clusters=3),
    lambda: ExactFlatClustering(),
    lambda: ExactFlatClustering(DirichletProcessMixture()),
    lambda: SparseTrellisClustering(n_clusters=3, random_state=0),
    lambda: GreedyHierarchicalClustering(n_clusters=3),
    lambda: BeamSearchHierarchicalClustering(n_clusters=3),
    lambda: BayesianHierarchicalClustering(),
    lambda: BayesianHierarchicalClustering(algorithm="exact"),
]


@pytest.mark.parametrize("make", FEATURE_ESTIMATORS)
@pytest.mark.parametrize("scale", [1e155, 1e300, 1e-300])
def test_features_at_any_scale_give_the_unit_scale_answer(make, scale):
    """Features scaled to float64's edges: the same clusters, no warning, no NaN."""
    X = np.random.default_rng(0).normal(size=(8, 3))
    reference = make().fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        scaled = make().fit(X * scale)
    np.testing.assert_array_equal(scaled.labels_, reference.labels_)
    _check_outputs(scaled)
    if hasattr(reference, "log_partition_") and not isinstance(reference.energy,
                                                                DirichletProcessMixture):
        # Similarities are scale-free (median heuristic): so is log Z.
        assert scaled.log_partition_ == pytest.approx(reference.log_partition_, rel=1e-9)


def test_dpm_evidence_shifts_by_the_jacobian_of_the_scale():
    X = np.random.default_rng(1).normal(size=(6, 2))
    reference = ExactFlatClustering(DirichletProcessMixture()).fit(X)
    scaled = ExactFlatClustering(DirichletProcessMixture()).fit(X * 2.0**900)
    # p(s X) = p(X) / s**(N d): every point's density is in units of s**-d.
    expected = reference.log_partition_ - 6 * 2 * 900 * np.log(2.0)
    assert scaled.log_partition_ == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("scale", [1.0, 1e38, 1e300, 1e-300])
def test_transitive_propagation_at_any_scale(scale):
    """The issue's float32 overflow: all singletons, converged_, NaN beliefs_ at 1e38."""
    llr = np.array([[0, 3.0, -1], [3, 0, 3], [-1, 3, 0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        model = TransitivePropagation().fit(llr * scale)
    assert model.labels_.tolist() == [0, 0, 0]
    assert model.converged_
    assert np.all(np.isfinite(model.beliefs_))
    assert model.objective_ == pytest.approx(5.0 * scale, rel=1e-12)


def test_overflowing_four_momenta_are_refused():
    momenta = np.array([[5.0, 1, 2, 3], [7.0, -2, 1, 4], [6.0, 1, -3, 2]]) * 1e155
    with pytest.raises(ValueError, match="four-momenta up to .* n_samples=3 .* larger units"):
        ExactHierarchicalClustering(GinkgoLikelihood()).fit(momenta)


@pytest.mark.parametrize("make, energy", [
    (ExactHierarchicalClustering, Dasgupta),
    (ExactFlatClustering, CorrelationClustering),
    (ExactFlatClustering, DirichletProcessMixture),
    (SparseTrellisClustering, Dasgupta),
    (GreedyHierarchicalClustering, CorrelationClustering),
    (BeamSearchHierarchicalClustering, Dasgupta),
])
def test_energy_class_instead_of_instance(make, energy):
    X = np.random.default_rng(0).normal(size=(5, 2))
    name = energy.__name__
    with pytest.raises(TypeError, match=f"energy={name} is a class; pass an instance"):
        make(energy=energy).fit(X)

"""What every estimator shares (sktrellis._estimator): a failed fit leaves no stale state.

Issue 22: after a refit that failed (a refused size, n_clusters > n_samples,
an energy error, Ctrl-C), n_features_in_ and the data sketch described the
new data while the posterior was the old one, so ``log_partition_scorer(m,
B)`` returned the log Z of A. A fit now either completes or leaves the
estimator unfitted.
"""
import numpy as np
import pytest
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

from sktrellis import (
    BestFirstHierarchicalClustering,
    ExactFlatClustering,
    ExactHierarchicalClustering,
    SparseTrellisClustering,
)
from sktrellis import _validation
from sktrellis.baselines import (
    BayesianHierarchicalClustering,
    BeamSearchHierarchicalClustering,
    GreedyHierarchicalClustering,
    TransitivePropagation,
)
from sktrellis.metrics import log_partition_scorer

_ENERGY_METHODS = ("split_potential", "cluster_potential", "merge_model", "search_bound")


def _inject_failure(model, kind, monkeypatch, n_samples):
    """Arrange for the next fit of `model` to fail in the given way; return the exception."""
    if kind == "n_clusters":
        model.set_params(n_clusters=n_samples + 1)
        return ValueError
    if kind == "size":
        monkeypatch.setattr(_validation, "memory_limits", lambda: [("MemAvailable", 1)])
        return ValueError
    error = ValueError("the energy failed") if kind == "energy" else KeyboardInterrupt()

    def fail(*args, **kwargs):
        raise error

    energy = model.get_params().get("energy")
    if energy is not None:
        for method in _ENERGY_METHODS:
            monkeypatch.setattr(energy, method, fail, raising=False)
    # and the first step after validation of the baselines that compute
    # their own likelihoods
    for method in ("_build_tree", "_pass_messages"):
        if hasattr(model, method):
            monkeypatch.setattr(type(model), method, fail)
    return type(error)


def _with_default_energy(model):
    """Instances whose methods the test may patch: the estimator's own default energy."""
    if "energy" in model.get_params() and model.energy is None:
        model.set_params(energy=model._default_energy())
    return model


CASES = [
    (ExactHierarchicalClustering(n_clusters=2), ("size", "n_clusters", "energy", "interrupt")),
    (ExactFlatClustering(n_clusters=2), ("size", "n_clusters", "energy", "interrupt")),
    (SparseTrellisClustering(n_clusters=2), ("n_clusters", "energy", "interrupt")),
    (BestFirstHierarchicalClustering(n_clusters=2), ("n_clusters", "energy", "interrupt")),
    (GreedyHierarchicalClustering(n_clusters=2), ("n_clusters", "energy", "interrupt")),
    (BeamSearchHierarchicalClustering(n_clusters=2), ("n_clusters", "energy", "interrupt")),
    (BayesianHierarchicalClustering(n_clusters=2), ("n_clusters", "energy", "interrupt")),
    (BayesianHierarchicalClustering(algorithm="exact", n_clusters=2), ("size", "n_clusters")),
    (TransitivePropagation(max_iter=20), ("size", "interrupt")),
]


@pytest.mark.parametrize(
    "estimator, kind",
    [(estimator, kind) for estimator, kinds in CASES for kind in kinds],
    ids=lambda value: value if isinstance(value, str) else type(value).__name__,
)
def test_a_failed_refit_leaves_the_estimator_unfitted(estimator, kind, monkeypatch):
    rng = np.random.default_rng(0)
    A, B = rng.normal(size=(7, 2)), rng.normal(size=(6, 3)) + 4.0
    if isinstance(estimator, TransitivePropagation):
        A, B = (X @ X.T - 1.0 for X in (A, B))
    model = _with_default_energy(estimator.__class__(**estimator.get_params(deep=False)))
    model.fit(A)
    check_is_fitted(model)
    with monkeypatch.context() as patch:
        error = _inject_failure(model, kind, patch, len(B))
        with pytest.raises(error):
            model.fit(B)
    with pytest.raises(NotFittedError):
        check_is_fitted(model)
    leftovers = [name for name in vars(model) if name.endswith("_") or name.startswith("_")]
    assert leftovers == []
    if hasattr(type(model), "posterior_") or isinstance(model, ExactFlatClustering):
        with pytest.raises(NotFittedError):
            log_partition_scorer(model, B)
    # and it refits to exactly what a fresh estimator gives
    model.set_params(**estimator.get_params(deep=False))
    _with_default_energy(model)
    fresh = _with_default_energy(estimator.__class__(**estimator.get_params(deep=False)))
    np.testing.assert_array_equal(model.fit(B).labels_, fresh.fit(B).labels_)


def test_the_issue_case_log_partition_scorer_of_a_failed_refit():
    """log_partition_scorer(m, B) returned the log Z of A after a refused refit on B."""
    rng = np.random.default_rng(1)
    A, B = rng.normal(size=(6, 2)), rng.normal(size=(4, 2))
    model = ExactHierarchicalClustering(n_clusters=2).fit(A)
    assert log_partition_scorer(model, A) == model.log_partition_
    with pytest.raises(ValueError, match="n_clusters=5 must be at most n_samples=4"):
        model.set_params(n_clusters=5).fit(B)
    with pytest.raises(NotFittedError):
        log_partition_scorer(model, B)


def test_a_potential_for_another_number_of_points_is_refused():
    """Issue 22: an energy whose potential covered 5 of the 6 rows was fitted silently."""
    from sktrellis.energies import Dasgupta, HierarchicalEnergy

    class FirstFive(HierarchicalEnergy):
        def split_potential(self, X):
            return Dasgupta().split_potential(X[:5])

    with pytest.raises(ValueError, match=r"FirstFive.split_potential\(X\) returned a "
                                         r"SplitPotential over n_points=5 points for X of "
                                         "n_samples=6"):
        ExactHierarchicalClustering(FirstFive()).fit(np.random.default_rng(0).normal(size=(6, 2)))


@pytest.mark.parametrize("estimator", [SparseTrellisClustering(), GreedyHierarchicalClustering(),
                                       BeamSearchHierarchicalClustering()])
def test_a_merge_model_for_another_number_of_points_is_refused(estimator, monkeypatch):
    from sktrellis.energies import Dasgupta

    energy = Dasgupta()
    monkeypatch.setattr(energy, "merge_model", lambda X: Dasgupta().merge_model(X[:5]))
    with pytest.raises(ValueError, match=r"merge_model\(X\) returned a .* over n_points=5 "
                                         "points for X of n_samples=6"):
        estimator.set_params(energy=energy).fit(np.random.default_rng(0).normal(size=(6, 2)))

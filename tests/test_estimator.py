"""What every estimator shares (sktrellis._estimator): a failed fit leaves no stale state.

After a refit that failed (a refused size, n_clusters > n_samples,
an energy error, Ctrl-C), n_features_in_ and the data sketch described the
new data while the posterior was the old one, so ``log_partition_scorer(m,
B)`` returned the log Z of A. A fit now either completes or leaves the
estimator unfitted.

``drop_posterior()`` frees the posterior tables, keeping the fitted
tree and summaries; posterior queries then say how to get them back.
"""
import pickle

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

from sktrellis import (
    BestFirstHierarchicalClustering,
    CertifiedFlatClustering,
    ExactFlatClustering,
    ExactHierarchicalClustering,
    SparseTrellisClustering,
)
from sktrellis._engine import resources
from sktrellis.baselines import (
    BayesianHierarchicalClustering,
    BeamSearchHierarchicalClustering,
    GreedyHierarchicalClustering,
    TransitivePropagation,
)
from sktrellis.energies import CorrelationClustering, Dasgupta
from sktrellis.metrics import log_partition_scorer

_ENERGY_METHODS = (
    "split_potential", "cluster_potential", "merge_model", "search_bound", "weights",
)


def _inject_failure(model, kind, monkeypatch, n_samples):
    """Arrange for the next fit of `model` to fail in the given way; return the exception."""
    if kind == "n_clusters":
        model.set_params(n_clusters=n_samples + 1)
        return ValueError
    if kind == "size":
        monkeypatch.setattr(resources, "memory_limits", lambda: [("MemAvailable", 1)])
        return ValueError
    error = ValueError("the energy failed") if kind == "energy" else KeyboardInterrupt()

    def fail(*args, **kwargs):
        raise error

    energy = model.get_params().get("energy")
    if energy is not None:
        # On the class too: a calibration works on clones of the energy.
        for method in _ENERGY_METHODS:
            monkeypatch.setattr(energy, method, fail, raising=False)
            if hasattr(type(energy), method):
                monkeypatch.setattr(type(energy), method, fail)
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
    (CertifiedFlatClustering(), ("energy", "interrupt")),
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


def test_log_partition_scorer_after_a_refused_refit():
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
    """An energy whose potential covered 5 of the 6 rows was fitted silently."""
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


###############################################################################
# drop_posterior

_HIERARCHICAL_QUERIES = {
    "cluster_probability": lambda m: m.cluster_probability([0, 1]),
    "most_probable_clusters": lambda m: m.most_probable_clusters(3),
    "clade_support": lambda m: m.clade_support(),
    "sample": lambda m: m.sample(2, random_state=0),
    "posterior_": lambda m: m.posterior_,
    "log_probability": lambda m: m.log_probability(m.linkage_matrix_),
}
_FLAT_QUERIES = {
    "cluster_probability": lambda m: m.cluster_probability([0, 1]),
    "most_probable_clusters": lambda m: m.most_probable_clusters(3),
    "sample": lambda m: m.sample(2, random_state=0),
    "log_probability": lambda m: m.log_probability(m.labels_),
    "n_clusters_log_partition_": lambda m: m.n_clusters_log_partition_,
}
_ESTIMATORS = [
    (ExactHierarchicalClustering(Dasgupta(beta=1.0), n_jobs=1), _HIERARCHICAL_QUERIES),
    # The bound on the spanned share of log Z (mass_bound_time) is a summary
    # outside the posterior, and half a second a fit: not asked here.
    (SparseTrellisClustering(Dasgupta(beta=1.0), random_state=0, mass_bound_time=0),
     _HIERARCHICAL_QUERIES),
    (ExactFlatClustering(CorrelationClustering(beta=1.0), n_jobs=1), _FLAT_QUERIES),
]


@pytest.mark.parametrize(
    "estimator, query",
    [(estimator, query) for estimator, queries in _ESTIMATORS for query in queries.items()],
    ids=lambda value: type(value).__name__ if hasattr(value, "fit") else value[0],
)
def test_drop_posterior_keeps_summaries_and_refuses_queries(estimator, query, global_random_seed):
    name, ask = query
    X = np.random.default_rng(global_random_seed).normal(size=(10, 2))
    model = estimator.fit(X)
    ask(model)  # answered while the tables are there
    summaries = {
        attribute: getattr(model, attribute)
        for attribute in ("labels_", "log_partition_", "map_log_potential_")
    }
    before = len(pickle.dumps(model))
    assert model.drop_posterior() is model
    restored = pickle.loads(pickle.dumps(model))
    assert len(pickle.dumps(model)) < before / 4
    for fitted in (model, restored):
        for attribute, value in summaries.items():
            np.testing.assert_array_equal(getattr(fitted, attribute), value)
        with pytest.raises(NotFittedError, match=r"drop_posterior\(\).*fit the estimator again"):
            ask(fitted)
    # Fitting again brings the posterior back.
    ask(model.fit(X))


def test_unfitted_drop_posterior_raises():
    with pytest.raises(NotFittedError, match="not fitted"):
        ExactHierarchicalClustering().drop_posterior()


def test_drop_posterior_shrinks_an_exact_pickle_to_kilobytes():
    X = np.random.default_rng(0).normal(size=(14, 2))
    model = ExactHierarchicalClustering(Dasgupta(beta=1.0), n_jobs=1).fit(X)
    model.cluster_probability([0, 1])  # the outside pass adds 8 bytes per subset
    # 2**14 subsets at tens of bytes each, against a few fitted arrays of N rows.
    assert len(pickle.dumps(model)) > 20 * (1 << 14)
    assert len(pickle.dumps(model.drop_posterior())) < 20_000


###############################################################################
# The fitted state changes in one step: concurrent fits of one object leave one
# whole fit, never one dataset's fingerprint beside another's posterior.

def test_concurrent_fits_leave_one_whole_fit():
    import threading

    from sktrellis._validation import data_sketch

    rng = np.random.default_rng(0)
    datasets = [rng.normal(size=(9, 2)), rng.normal(size=(9, 3)) * 3.0]
    expected = [ExactHierarchicalClustering(Dasgupta(beta=1.0)).fit(X).log_partition_
                for X in datasets]
    for _ in range(10):
        model = ExactHierarchicalClustering(Dasgupta(beta=1.0))
        barrier = threading.Barrier(4)

        def fit(X):
            barrier.wait()
            model.fit(X)

        threads = [threading.Thread(target=fit, args=(datasets[k % 2],)) for k in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        which = [k for k, X in enumerate(datasets)
                 if model.n_features_in_ == X.shape[1]
                 and np.allclose(model._fit_sketch, data_sketch(X))]
        assert len(which) == 1
        assert model.log_partition_ == expected[which[0]]
        assert log_partition_scorer(model, datasets[which[0]]) == expected[which[0]]


@pytest.mark.parametrize("Estimator", [ExactHierarchicalClustering, SparseTrellisClustering])
def test_a_grid_over_the_default_energys_beta(Estimator):
    """GridSearchCV over energy__beta failed inside scikit-learn with the default energy=None."""
    from sklearn.model_selection import GridSearchCV

    X = np.random.default_rng(0).normal(size=(8, 2))
    idx = np.arange(len(X))
    search = GridSearchCV(Estimator(), {"energy__beta": [0.5, 2.0]},
                          scoring=log_partition_scorer, cv=[(idx, idx)]).fit(X)
    assert search.best_params_["energy__beta"] in (0.5, 2.0)
    assert search.best_estimator_.energy.get_params() == Dasgupta(beta=search.best_params_[
        "energy__beta"]).get_params()
    model = Estimator().set_params(energy__beta=3.0, n_clusters=3)
    assert (model.energy.beta, model.n_clusters) == (3.0, 3)
    assert Estimator().set_params(n_clusters=3).energy is None


@pytest.mark.parametrize("Estimator", [ExactHierarchicalClustering,
                                       BestFirstHierarchicalClustering])
def test_a_split_potential_of_none_is_a_type_error_naming_the_method(Estimator):
    """It was AttributeError: 'NoneType' object has no attribute 'n_points'."""

    class NoPotential(Dasgupta):
        def split_potential(self, X):
            return None

    with pytest.raises(TypeError, match=r"NoPotential.split_potential\(X\) returned NoneType "
                                        r"None; it must return a SplitPotential"):
        Estimator(NoPotential(beta=1.0)).fit(np.random.default_rng(0).normal(size=(6, 2)))

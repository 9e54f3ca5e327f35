"""What the estimators share (sktrellis._estimator): dropping the posterior tables."""
import pickle

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

from sktrellis import ExactFlatClustering, ExactHierarchicalClustering, SparseTrellisClustering
from sktrellis.energies import CorrelationClustering, Dasgupta

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
    (SparseTrellisClustering(Dasgupta(beta=1.0), random_state=0), _HIERARCHICAL_QUERIES),
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

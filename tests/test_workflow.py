"""The user story: pipelines, grid search with tree scorers, scipy dendrograms, pickling."""
import pickle

import numpy as np
import pytest
from scipy.cluster.hierarchy import dendrogram, fcluster
from sklearn.base import clone
from sklearn.metrics import adjusted_rand_score
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sktrellis import ExactHierarchicalClustering
from sktrellis.datasets import load_iris12
from sktrellis.energies import Dasgupta
from sktrellis.metrics import (
    dendrogram_purity,
    expected_dendrogram_purity,
    log_partition_scorer,
    make_posterior_scorer,
    make_tree_scorer,
)

GAMMAS = [0.01, 0.1, 1.0, 10.0]


@pytest.mark.slow  # eight fits; the quick suite has the pipeline and scorer tests below
def test_pipeline_grid_search_and_scipy_dendrogram():
    iris = load_iris12()
    X, y = iris.data, iris.target
    pipeline = make_pipeline(
        StandardScaler(), ExactHierarchicalClustering(Dasgupta(), n_clusters=3)
    )
    # Transductive clusterers are fitted and scored on the same points.
    idx = np.arange(len(X))
    search = GridSearchCV(
        pipeline,
        {"exacthierarchicalclustering__energy__gamma": GAMMAS},
        scoring=make_tree_scorer(dendrogram_purity),
        cv=[(idx, idx)],
    ).fit(X, y)

    best = search.best_estimator_[-1]
    Xs = StandardScaler().fit_transform(X)
    purities = [
        dendrogram_purity(y, ExactHierarchicalClustering(Dasgupta(gamma=g)).fit(Xs).linkage_matrix_)
        for g in GAMMAS
    ]
    np.testing.assert_allclose(search.cv_results_["mean_test_score"], purities, rtol=1e-12)
    assert search.best_params_ == {
        "exacthierarchicalclustering__energy__gamma": GAMMAS[int(np.argmax(purities))]
    }
    assert search.best_score_ == pytest.approx(dendrogram_purity(y, best.linkage_matrix_))

    tree = dendrogram(best.linkage_matrix_, no_plot=True, labels=iris.sample_names)
    assert sorted(tree["leaves"]) == list(range(len(X)))
    assert sorted(tree["ivl"]) == sorted(iris.sample_names)
    # scipy's cut of the MAP tree is the estimator's MAP-tree labels.
    flat = fcluster(best.linkage_matrix_, 3, criterion="maxclust")
    map_cut = clone(best).set_params(labels_from="map_tree").fit(Xs).labels_
    assert adjusted_rand_score(flat, map_cut) == 1.0
    assert adjusted_rand_score(search.best_estimator_.fit_predict(X), best.labels_) == 1.0


def test_multi_metric_search_with_posterior_scores():
    iris = load_iris12()
    X, y = iris.data[:9], iris.target[:9]
    idx = np.arange(len(X))
    scoring = {
        "purity": make_tree_scorer(dendrogram_purity),
        "expected_purity": make_posterior_scorer(expected_dendrogram_purity),
        "log_z": log_partition_scorer,
    }
    search = GridSearchCV(
        make_pipeline(StandardScaler(), ExactHierarchicalClustering(Dasgupta())),
        {"exacthierarchicalclustering__energy__beta": [0.3, 3.0]},
        scoring=scoring, refit="expected_purity", cv=[(idx, idx)],
    ).fit(X, y)
    results = search.cv_results_
    for i, beta in enumerate([0.3, 3.0]):
        model = ExactHierarchicalClustering(Dasgupta(beta=beta)).fit(
            StandardScaler().fit_transform(X)
        )
        assert results["mean_test_purity"][i] == pytest.approx(
            dendrogram_purity(y, model.linkage_matrix_)
        )
        assert results["mean_test_expected_purity"][i] == pytest.approx(
            expected_dendrogram_purity(y, model), rel=1e-10
        )
        assert results["mean_test_log_z"][i] == pytest.approx(model.log_partition_, rel=1e-12)
    # A colder posterior puts more mass on trees near the (pure) MAP tree.
    assert search.best_params_ == {"exacthierarchicalclustering__energy__beta": 3.0}


def test_pickle_round_trip_keeps_the_posterior(global_random_seed):
    X = np.random.default_rng(global_random_seed).normal(size=(8, 2))
    model = ExactHierarchicalClustering(Dasgupta(beta=2.0), n_clusters=3).fit(X)
    restored = pickle.loads(pickle.dumps(model))
    for name in ("labels_", "linkage_matrix_", "children_", "distances_"):
        np.testing.assert_array_equal(getattr(restored, name), getattr(model, name))
    for name in ("log_partition_", "map_log_potential_", "n_trees_", "n_leaves_", "n_features_in_"):
        assert getattr(restored, name) == getattr(model, name)
    assert restored.cluster_probability([0, 1, 2]) == model.cluster_probability([0, 1, 2])
    assert restored.log_probability(model.linkage_matrix_) == model.log_probability(
        model.linkage_matrix_
    )
    for a, b in zip(restored.sample(3, random_state=0), model.sample(3, random_state=0)):
        np.testing.assert_array_equal(a, b)
    pipeline = make_pipeline(StandardScaler(), clone(model)).fit(X)
    restored = pickle.loads(pickle.dumps(pipeline))
    np.testing.assert_array_equal(restored[-1].labels_, pipeline[-1].labels_)


def test_clone_gives_an_unfitted_independent_copy(global_random_seed):
    X = np.random.default_rng(global_random_seed).normal(size=(6, 2))
    model = ExactHierarchicalClustering(Dasgupta(gamma=0.5, beta=2.0), n_clusters=3).fit(X)
    copy = clone(model)
    assert not hasattr(copy, "labels_")
    assert copy.get_params()["energy__gamma"] == 0.5 and copy.n_clusters == 3
    assert copy.energy is not model.energy
    copy.set_params(energy__beta=5.0)
    assert model.energy.beta == 2.0


def test_dataframe_input():
    pd = pytest.importorskip("pandas")
    iris = load_iris12()
    frame = pd.DataFrame(iris.data, columns=iris.feature_names)
    model = ExactHierarchicalClustering(n_clusters=3).fit(frame)
    reference = ExactHierarchicalClustering(n_clusters=3).fit(iris.data)
    np.testing.assert_array_equal(model.feature_names_in_, iris.feature_names)
    np.testing.assert_array_equal(model.linkage_matrix_, reference.linkage_matrix_)
    assert model.log_partition_ == reference.log_partition_
    # pandas all the way through: the scaler hands the clusterer a DataFrame.
    pipeline = make_pipeline(StandardScaler(), ExactHierarchicalClustering(n_clusters=3))
    pipeline.set_output(transform="pandas").fit(frame)
    np.testing.assert_array_equal(pipeline[-1].feature_names_in_, iris.feature_names)
    scorer = make_tree_scorer(dendrogram_purity)
    target = pd.Series(iris.target)
    expected = dendrogram_purity(iris.target, pipeline[-1].linkage_matrix_)
    assert scorer(pipeline, frame, target) == expected

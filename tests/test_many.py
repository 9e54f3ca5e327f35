"""fit_many: local processes by default, Dask distributed under its joblib backend."""
import joblib
import numpy as np
import pytest
from sklearn.base import clone
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sktrellis import ExactHierarchicalClustering
from sktrellis._many import fit_many
from sktrellis.datasets import make_jets
from sktrellis.energies import Dasgupta, GinkgoLikelihood


def _datasets(seed, n_datasets=6):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(int(rng.integers(3, 8)), 2)) for _ in range(n_datasets)]


def _one_by_one(estimator, datasets):
    return [clone(estimator).fit(X) for X in datasets]


@pytest.mark.parametrize("n_jobs", [None, 1, 2])
def test_fit_many_equals_fitting_one_by_one(n_jobs, global_random_seed):
    datasets = _datasets(global_random_seed)
    template = ExactHierarchicalClustering(Dasgupta(beta=2.0), n_clusters=2, n_jobs=1)
    fitted = fit_many(template, datasets, n_jobs=n_jobs)
    assert not hasattr(template, "labels_"), "the template must stay unfitted"
    for model, reference, X in zip(fitted, _one_by_one(template, datasets), datasets):
        assert model is not template and model.n_leaves_ == len(X)
        np.testing.assert_array_equal(model.linkage_matrix_, reference.linkage_matrix_)
        assert model.log_partition_ == reference.log_partition_
        # Fitted estimators come back whole: posterior queries still work.
        assert model.cluster_probability([0, 1]) == reference.cluster_probability([0, 1])


def test_fit_many_light_results(global_random_seed):
    datasets = _datasets(global_random_seed)
    template = make_pipeline(StandardScaler(), ExactHierarchicalClustering(n_jobs=1))
    references = _one_by_one(template, datasets)
    log_z = fit_many(template[-1], datasets, result="log_partition_", n_jobs=2)
    assert log_z == [clone(template[-1]).fit(X).log_partition_ for X in datasets]
    records = fit_many(template, datasets, result=lambda p: {"labels": p[-1].labels_})
    for record, reference in zip(records, references):
        np.testing.assert_array_equal(record["labels"], reference[-1].labels_)
    named = fit_many(template[-1], iter(datasets), result=["labels_", "n_trees_"])
    assert [set(r) for r in named] == [{"labels_", "n_trees_"}] * len(datasets)
    assert fit_many(template, []) == []


def test_fit_many_names_the_failing_dataset():
    datasets = [np.zeros((4, 2)), np.zeros((1, 2)), np.zeros((3, 2))]
    with pytest.raises(ValueError, match="minimum of 2") as info:
        fit_many(ExactHierarchicalClustering(n_jobs=1), datasets)
    assert "datasets[1]" in "".join(getattr(info.value, "__notes__", []))


@pytest.mark.parametrize("result", [3, [], ["labels_", 2]])
def test_fit_many_rejects_bad_result(result):
    with pytest.raises(ValueError, match="result must be"):
        fit_many(ExactHierarchicalClustering(), [np.zeros((3, 2))], result=result)


def test_fit_many_on_a_dask_cluster(global_random_seed):
    distributed = pytest.importorskip(
        "distributed",
        reason="the Dask path needs the optional extra: pip install 'dask[distributed]'",
    )
    jets = make_jets(6, n_leaves=6, random_state=global_random_seed)
    datasets = [jet.momenta for jet in jets]
    template = ExactHierarchicalClustering(GinkgoLikelihood(), n_jobs=1)
    expected = [model.log_partition_ for model in _one_by_one(template, datasets)]
    # Two single-threaded workers in this process, talking TCP on loopback
    # only, so tasks and results really go through Dask's serialisation.
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, protocol="tcp",
        host="127.0.0.1", dashboard_address=None,
    ) as cluster, distributed.Client(cluster) as client:
        with joblib.parallel_backend("dask"):
            fitted = fit_many(template, datasets)
            log_z = fit_many(template, datasets, result="log_partition_")
        assert len(client.scheduler_info()["workers"]) == 2
    assert log_z == pytest.approx(expected, rel=1e-12)
    assert [model.log_partition_ for model in fitted] == pytest.approx(expected, rel=1e-12)
    np.testing.assert_array_equal(
        fitted[0].linkage_matrix_, clone(template).fit(datasets[0]).linkage_matrix_
    )

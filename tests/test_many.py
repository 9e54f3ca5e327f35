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


@pytest.fixture
def processes_always_pay(monkeypatch):
    """Send even tiny work to worker processes, so that path is tested."""
    from sktrellis import _many

    monkeypatch.setattr(_many, "PROCESS_START_SECONDS", 0.0)


# Worker processes: their start-up (about 3 CPU s for two, each importing
# numpy, scikit-learn and sktrellis) is for the full suite.
_PROCESSES = pytest.mark.slow


@pytest.mark.parametrize("n_jobs", [None, 1, pytest.param(2, marks=_PROCESSES)])
def test_fit_many_equals_fitting_one_by_one(n_jobs, global_random_seed, processes_always_pay):
    datasets = _datasets(global_random_seed)
    template = ExactHierarchicalClustering(Dasgupta(beta=2.0), n_clusters=2, n_jobs=1)
    fitted = fit_many(template, datasets, n_jobs=n_jobs)
    assert fitted.execution == ("parallel" if n_jobs == 2 else "in-process")
    assert not hasattr(template, "labels_"), "the template must stay unfitted"
    for model, reference, X in zip(fitted, _one_by_one(template, datasets), datasets):
        assert model is not template and model.n_leaves_ == len(X)
        np.testing.assert_array_equal(model.linkage_matrix_, reference.linkage_matrix_)
        assert model.log_partition_ == reference.log_partition_
        # Fitted estimators come back whole: posterior queries still work.
        assert model.cluster_probability([0, 1]) == reference.cluster_probability([0, 1])


def test_small_work_stays_in_process(global_random_seed, monkeypatch):
    from sktrellis import _many

    # 200 fits of 9 points took 4.4 s through two processes, 0.47 s in a
    # loop. The choice rests on a timing: made certain here by what starting
    # processes is taken to cost (benchmarks/bench_fit_many.py measures it).
    monkeypatch.setattr(_many, "PROCESS_START_SECONDS", 1e9)
    rng = np.random.default_rng(global_random_seed)
    datasets = [rng.normal(size=(9, 2)) for _ in range(50)]
    template = ExactHierarchicalClustering(Dasgupta(beta=1.0), n_jobs=1)
    log_z = fit_many(template, datasets, result="log_partition_", n_jobs=2)
    assert (log_z.execution, log_z.backend, log_z.batch_size) == ("in-process", None, 1)
    assert log_z.task_seconds > 0
    assert log_z == [clone(template).fit(X).log_partition_ for X in datasets]
    # One worker never measures: it is a loop.
    assert fit_many(template, datasets[:3], n_jobs=1).task_seconds is None


@_PROCESSES
@pytest.mark.parametrize("batch_size", ["auto", 4])
@pytest.mark.parametrize("as_generator", [False, True])
def test_work_worth_processes_goes_to_them_in_batches(
    batch_size, as_generator, monkeypatch, global_random_seed
):
    from sktrellis import _many

    datasets = _datasets(global_random_seed, n_datasets=12)
    template = ExactHierarchicalClustering(Dasgupta(beta=2.0), n_jobs=1)
    # Work "worth" processes once a few datasets are read ahead, whatever
    # the first fit took: the rest come from the generator as workers ask.
    monkeypatch.setattr(_many, "PROCESS_START_SECONDS", 1e-9)
    source = (X for X in datasets) if as_generator else datasets
    log_z = fit_many(template, source, result="log_partition_", n_jobs=2, batch_size=batch_size)
    assert (log_z.execution, log_z.backend) == ("parallel", "LokyBackend")
    if batch_size == "auto":
        batch_size = max(1, int(_many.BATCH_SECONDS / log_z.task_seconds))
    assert log_z.batch_size == batch_size
    assert log_z == [clone(template).fit(X).log_partition_ for X in datasets]


@pytest.mark.parametrize("batch_size", [0, -1, 1.5, "big"])
def test_fit_many_rejects_bad_batch_size(batch_size):
    with pytest.raises(ValueError, match="batch_size must be"):
        fit_many(ExactHierarchicalClustering(), [np.zeros((3, 2))], batch_size=batch_size)


@_PROCESSES
def test_fit_many_light_results(global_random_seed, processes_always_pay):
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


@pytest.mark.parametrize("n_jobs", [1, pytest.param(2, marks=_PROCESSES)])
def test_fit_many_names_the_failing_dataset(n_jobs, processes_always_pay):
    rng = np.random.default_rng(0)
    datasets = [rng.normal(size=(4, 2)), rng.normal(size=(1, 2)), rng.normal(size=(3, 2))]
    with pytest.raises(ValueError, match="minimum of 2") as info:
        fit_many(ExactHierarchicalClustering(n_jobs=1), datasets, n_jobs=n_jobs)
    assert "datasets[1]" in "".join(getattr(info.value, "__notes__", []))


@pytest.mark.parametrize("result", [3, [], ["labels_", 2]])
def test_fit_many_rejects_bad_result(result):
    with pytest.raises(ValueError, match="result must be"):
        fit_many(ExactHierarchicalClustering(), [np.zeros((3, 2))], result=result)


@pytest.mark.slow  # starts a Dask cluster
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


@pytest.mark.slow  # starts a Dask cluster of worker processes
def test_the_documented_dask_script_runs_as_a_script(tmp_path):
    """A local cluster's workers import the script again: the example must guard its work."""
    import subprocess
    import sys
    import textwrap

    pytest.importorskip("distributed")
    doc = fit_many.__doc__
    example = textwrap.dedent(doc.split("cluster of its own); for a")[1].split("::\n")[1])
    assert 'if __name__ == "__main__":' in example
    script = tmp_path / "fit_jets.py"
    script.write_text(
        "from sktrellis import ExactHierarchicalClustering, fit_many\n"
        "from sktrellis.datasets import make_jets\n"
        "from sktrellis.energies import GinkgoLikelihood\n"
        "model = ExactHierarchicalClustering(GinkgoLikelihood(), n_jobs=1)\n"
        "datasets = [jet.momenta for jet in make_jets(4, n_leaves=5, random_state=0)]\n"
        + example
        + "    print(len(results), sorted(results[0]))\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().endswith("4 ['labels_', 'log_partition_']")


def test_fixing_the_calibrated_beta_gives_the_same_model(global_random_seed):
    """The documented fast path: calibrate once, then fit with beta fixed."""
    rng = np.random.default_rng(global_random_seed)
    datasets = [rng.normal(size=(8, 12)) for _ in range(3)]
    calibrated = ExactHierarchicalClustering(n_jobs=1).fit(datasets[0])
    fixed = ExactHierarchicalClustering(Dasgupta(beta=calibrated.beta_), n_jobs=1)
    first = fit_many(fixed, datasets)[0]
    np.testing.assert_array_equal(first.linkage_matrix_, calibrated.linkage_matrix_)
    assert first.log_partition_ == pytest.approx(calibrated.log_partition_, rel=1e-12)
    assert first.beta_ == calibrated.beta_

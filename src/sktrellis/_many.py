"""Fit one estimator to many small datasets in parallel, locally or on Dask."""
import itertools
import math
import time

from joblib import Parallel, delayed, effective_n_jobs
from joblib._parallel_backends import LokyBackend, MultiprocessingBackend
from joblib.parallel import get_active_backend
from sklearn.base import clone

#: What starting local worker processes costs, in seconds of one core: the
#: loky workers import numpy, scikit-learn and sktrellis, and the first
#: fit_many call of a session paid 2 to 20 s for it on a loaded 2-core
#: machine (benchmarks/bench_fit_many.py). Work of less than this (spread
#: over the workers) stays in the calling process.
PROCESS_START_SECONDS = 2.0
#: Tasks go to the workers in batches of about this many seconds, so that
#: dispatching and pickling (milliseconds per batch) stay small beside the work.
BATCH_SECONDS = 0.2
#: How many fits fit_many times in process before choosing.
_TIMED_FITS = 3


class FitManyResults(list):
    """The list of results of :func:`fit_many`, and how they were computed.

    Attributes
    ----------
    execution : {"in-process", "parallel"}
        "in-process": a plain loop in the calling process; "parallel":
        through joblib (local processes, or the backend of the active
        ``joblib.parallel_backend`` context).
    backend : str
        joblib's backend class for "parallel" (e.g. ``"LokyBackend"``),
        ``None`` in process.
    batch_size : int or str
        Tasks per batch sent to a worker ("parallel"), 1 in process.
    task_seconds : float or None
        Time of a fit, from which the choice was made: the fastest of the
        first three, run and timed in process (None when nothing was
        measured: one worker, or no datasets).
    """

    execution = "in-process"
    backend = None
    batch_size = 1
    task_seconds = None


def _extract(estimator, result):
    if result is None:
        return estimator
    if isinstance(result, str):
        return getattr(estimator, result)
    if callable(result):
        return result(estimator)
    return {name: getattr(estimator, name) for name in result}


def _fit_one(estimator, X, result, index):
    try:
        fitted = clone(estimator).fit(X)
        return _extract(fitted, result)
    except Exception as error:
        # joblib re-raises the worker's exception as is; say which dataset
        # (exception notes exist from Python 3.11 on).
        if hasattr(error, "add_note"):
            error.add_note(f"raised by fit_many while fitting datasets[{index}]")
        raise


def _check_result(result):
    if result is None or isinstance(result, str) or callable(result):
        return result
    try:
        names = list(result)
    except TypeError:
        names = None
    if not names or not all(isinstance(name, str) for name in names):
        raise ValueError(
            "result must be None, an attribute name, a list of attribute names or a "
            f"callable; got {result!r}"
        )
    return names


def fit_many(estimator, datasets, *, result=None, n_jobs=None, batch_size="auto", verbose=0):
    """Fit a clone of ``estimator`` to each dataset, in parallel.

    For many small, independent problems: thousands of jets, one patient
    cohort per trial. Work is spread with joblib: over local processes by
    default, and over a Dask distributed cluster when called inside
    ``joblib.parallel_backend("dask")`` (requires ``dask[distributed]`` and a
    connected ``distributed.Client``), which is how one scales beyond one
    machine without changing the call.

    Parameters
    ----------
    estimator : estimator
        Unfitted template (e.g. ``ExactHierarchicalClustering(GinkgoLikelihood())``
        or a ``Pipeline``); never modified. Each dataset gets its own clone.
    datasets : iterable of array-like
        The datasets, each a valid ``X`` for ``estimator.fit``. May be a
        generator: datasets are read as workers become free.
    result : None, str, list of str or callable, default=None
        What to return per dataset. None: the fitted estimator. A name such
        as ``"log_partition_"``: that attribute. A list of names: a dict of
        those attributes. A callable: ``result(fitted_estimator)``. Anything
        but None is computed on the worker, so only that light result travels
        back, not the estimator and its 2**N-entry trellis tables.
    n_jobs : int, default=None
        Number of joblib workers. None means 1 unless in a
        ``joblib.parallel_backend`` context (under the Dask backend: all
        workers of the cluster); -1 means all processors. With several
        workers, give the estimator ``n_jobs=1`` so its own threads do not
        compete with the other workers (see Notes).
    batch_size : int or "auto", default="auto"
        Datasets per task sent to a worker. "auto": as many as take about
        0.2 s (BATCH_SECONDS), from the time of the first fits.
    verbose : int, default=0
        Verbosity of joblib's progress messages.

    Returns
    -------
    results : FitManyResults
        A list with one entry per dataset, in the order of ``datasets``; its
        ``execution``, ``backend``, ``batch_size`` and ``task_seconds`` say
        how they were computed.

    See Also
    --------
    joblib.Parallel : What runs the fits.

    Notes
    -----
    Parallelism over datasets beats parallelism inside one fit when each fit
    is small: a level of the dynamic program over a dozen points takes
    microseconds, less than waking the estimator's OpenMP threads, and on a
    busy machine threads waiting for each other make small fits several
    times slower (``benchmarks/bench_fit_many.py``). So use
    ``fit_many(ExactHierarchicalClustering(..., n_jobs=1), datasets,
    n_jobs=-1)``.

    Processes only pay for enough work: with local processes (loky, the
    default, or multiprocessing) and several workers, the first three
    datasets are fitted in process and timed, and datasets are read ahead until their
    estimated work exceeds what starting the workers costs
    (PROCESS_START_SECONDS, times w / (w - 1) for w workers); if the
    datasets run out first, all are fitted in the calling process. Fitting
    200 datasets of 9 points with ``n_jobs=2`` took 4.4 s through processes
    against 0.47 s for a plain loop before this choice was made (see
    ``benchmarks/bench_fit_many.py``). Under another backend (Dask,
    threading) every dataset but the first three goes to the backend.

    If a fit fails, its exception is raised with a note naming the index of
    the dataset.

    The default temperature of the energies, ``beta="auto"``, is calibrated
    by a bootstrap in every fit, which costs far more than a fit of a small
    dataset: 0.64 s against 0.006 s of CPU for a 14 x 20 fit with the
    calibrated beta fixed (about 100x), and 12.4 s against 0.11 s for 20
    such datasets (``benchmarks/bench_beta_cost.py``, loaded machine). For
    datasets of one kind, calibrate once and fix ``beta`` (the fit on the
    calibration dataset is then the same model)::

        beta = ExactHierarchicalClustering().fit(datasets[0]).beta_
        model = ExactHierarchicalClustering(Dasgupta(beta=beta), n_jobs=1)
        results = fit_many(model, datasets, result="labels_", n_jobs=-1)

    Each dataset's own calibration differs a little (beta_ 0.59-0.86
    around the fixed 0.74 in that benchmark); keep ``beta="auto"`` when
    each dataset must have its own.

    Examples
    --------
    >>> from sktrellis import ExactHierarchicalClustering, fit_many
    >>> from sktrellis.datasets import make_jets
    >>> from sktrellis.energies import GinkgoLikelihood
    >>> jets = make_jets(4, n_leaves=6, random_state=0)
    >>> model = ExactHierarchicalClustering(GinkgoLikelihood(), n_jobs=1)
    >>> fitted = fit_many(model, (jet.momenta for jet in jets))
    >>> [m.n_leaves_ for m in fitted]
    [6, 6, 6, 6]
    >>> log_z = fit_many(model, [jet.momenta for jet in jets], result="log_partition_", n_jobs=2)
    >>> bool(log_z[0] == fitted[0].log_partition_)
    True
    >>> log_z.execution  # four small jets do not pay for starting two processes
    'in-process'

    On a Dask cluster (``pip install "dask[distributed]"``), from a script:
    its work goes under ``if __name__ == "__main__":``, because a local
    cluster starts its workers as new processes that import the script
    again (unguarded, each would try to start a cluster of its own); for a
    running cluster, pass its address to ``Client`` instead::

        import joblib
        from distributed import Client, LocalCluster

        if __name__ == "__main__":
            with Client(LocalCluster(n_workers=2)), joblib.parallel_backend("dask"):
                results = fit_many(model, datasets, result=["labels_", "log_partition_"])
    """
    result = _check_result(result)
    if batch_size != "auto" and not (isinstance(batch_size, int) and batch_size >= 1):
        raise ValueError(f"batch_size must be a positive int or 'auto'; got {batch_size!r}")
    results = FitManyResults()
    datasets = iter(datasets)
    n_workers = effective_n_jobs(n_jobs)
    if n_workers == 1:
        results.extend(_fit_one(estimator, X, result, i) for i, X in enumerate(datasets))
        return results
    # The first fits run here, timed: the fastest of them is the cost of a
    # task (the very first pays for warming up, and a busy machine for spikes).
    timings = []
    for index, X in zip(range(_TIMED_FITS), datasets):
        start = time.perf_counter()
        results.append(_fit_one(estimator, X, result, index))
        timings.append(time.perf_counter() - start)
    if not timings:
        return results
    task_seconds = results.task_seconds = min(timings)
    backend = get_active_backend()[0]
    ahead = []
    if isinstance(backend, (LokyBackend, MultiprocessingBackend)):
        # Read ahead until the work would pay for starting the workers.
        worth = PROCESS_START_SECONDS * n_workers / (n_workers - 1)
        for X in datasets:
            ahead.append(X)
            if task_seconds * len(ahead) >= worth:
                break
        else:
            results.extend(
                _fit_one(estimator, X, result, i)
                for i, X in enumerate(ahead, start=len(timings))
            )
            return results
    if batch_size == "auto":
        batch_size = max(1, math.floor(BATCH_SECONDS / max(task_seconds, 1e-6)))
    results.execution, results.backend = "parallel", type(backend).__name__
    results.batch_size = batch_size
    parallel = Parallel(n_jobs=n_jobs, batch_size=batch_size, verbose=verbose)
    results.extend(parallel(
        delayed(_fit_one)(estimator, X, result, index)
        for index, X in enumerate(itertools.chain(ahead, datasets), start=len(timings))
    ))
    return results

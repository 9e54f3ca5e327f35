"""Fit one estimator to many small datasets in parallel, locally or on Dask."""
from joblib import Parallel, delayed
from sklearn.base import clone


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


def fit_many(estimator, datasets, *, result=None, n_jobs=None, verbose=0):
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
    verbose : int, default=0
        joblib's progress messages.

    Returns
    -------
    results : list
        One entry per dataset, in the order of ``datasets``.

    Notes
    -----
    Parallelism over datasets beats parallelism inside one fit when each fit
    is small: a level of the dynamic program over a dozen points takes
    microseconds, less than waking the estimator's OpenMP threads, and on a
    busy machine threads waiting for each other make small fits several
    times slower (``benchmarks/bench_fit_many.py``). So use
    ``fit_many(ExactHierarchicalClustering(..., n_jobs=1), datasets,
    n_jobs=-1)``.

    If a fit fails, its exception is raised with a note naming the index of
    the dataset.

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
    >>> log_z = fit_many(model, [jet.momenta for jet in jets], result="log_partition_")
    >>> bool(log_z[0] == fitted[0].log_partition_)
    True

    On a Dask cluster (``pip install "dask[distributed]"``)::

        from distributed import Client
        import joblib
        with Client("tcp://scheduler:8786"), joblib.parallel_backend("dask"):
            results = fit_many(model, datasets, result=["labels_", "log_partition_"])
    """
    result = _check_result(result)
    parallel = Parallel(n_jobs=n_jobs, verbose=verbose)
    return parallel(
        delayed(_fit_one)(estimator, X, result, index) for index, X in enumerate(datasets)
    )

"""Throughput of sktrellis.fit_many (datasets per second), 1 vs 2 workers.

First, the small-task case of issue 25: ``fit_many(ExactHierarchicalClustering(),
200 datasets of 9 points, n_jobs=2)`` against a plain loop and against the
dispatch fit_many had before (every dataset a joblib task, joblib's default
batching), each timed with the loky workers stopped first (the cost a first
call pays) and again with them running; interleaved, repeated, medians.

Fits ExactHierarchicalClustering(GinkgoLikelihood(), n_jobs=1) to many toy
jets, with joblib's local processes (loky) and with a Dask distributed
LocalCluster of worker processes on loopback (if dask is installed). Each
configuration runs once to warm up (start workers, import modules), then is
timed. Prints a Markdown table.

    PYTHONPATH=. python3 benchmarks/bench_fit_many.py [--jets 10:400 13:100] [--no-dask]

Each ``leaves:count`` pair is one workload: ``count`` jets of ``leaves``
particles (an exact fit costs ~3**leaves, so bigger jets come fewer).
The machine's other load skews the numbers: run it on an idle machine.
"""
import argparse
import importlib.util
import os
import time

import joblib
import numpy as np
from joblib import Parallel, delayed
from joblib.externals.loky import get_reusable_executor
from sklearn.base import clone

from sktrellis import ExactHierarchicalClustering
from sktrellis._many import _fit_one, fit_many
from sktrellis.datasets import make_jets
from sktrellis.energies import GinkgoLikelihood


def throughput(model, datasets, **kwargs):
    fit_many(model, datasets[:8], result="log_partition_", **kwargs)
    start = time.perf_counter()
    fit_many(model, datasets, result="log_partition_", **kwargs)
    return len(datasets) / (time.perf_counter() - start)


def small_tasks(n_datasets, n_points, repeats):
    """Seconds of a loop, the old dispatch and fit_many, cold and warm workers (medians)."""
    rng = np.random.default_rng(0)
    datasets = [rng.normal(size=(n_points, 2)) for _ in range(n_datasets)]
    model = ExactHierarchicalClustering()

    def loop():
        return [clone(model).fit(X) for X in datasets]

    def before():
        # fit_many before issue 25: every dataset a task for joblib.
        return Parallel(n_jobs=2)(
            delayed(_fit_one)(model, X, None, i) for i, X in enumerate(datasets)
        )

    def after():
        return fit_many(model, datasets, n_jobs=2)

    times = {
        (name, state): [] for name in ("loop", "before", "after") for state in ("cold", "warm")
    }
    modes = set()
    for _ in range(repeats):
        for name, run in (("loop", loop), ("before", before), ("after", after)):
            for state in ("cold", "warm"):
                if state == "cold":
                    get_reusable_executor().shutdown(wait=True)
                else:
                    Parallel(n_jobs=2)(delayed(abs)(i) for i in range(4))  # workers up
                start = time.perf_counter()
                out = run()
                times[name, state].append(time.perf_counter() - start)
                if name == "after":
                    modes.add((out.execution, out.batch_size))
    return {key: float(np.median(value)) for key, value in times.items()}, modes


def dask_throughput(model, datasets, n_workers):
    from distributed import Client, LocalCluster

    with LocalCluster(
        n_workers=n_workers, threads_per_worker=1, processes=True, protocol="tcp",
        host="127.0.0.1", dashboard_address=None,
    ) as cluster, Client(cluster), joblib.parallel_backend("dask"):
        return throughput(model, datasets)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jets", nargs="+", default=["10:400", "13:100"])
    parser.add_argument("--no-dask", action="store_true")
    parser.add_argument("--small", default="200:9", help="datasets:points of the small case")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    use_dask = not args.no_dask and importlib.util.find_spec("distributed") is not None

    print(f"cores available: {len(os.sched_getaffinity(0))}, load average before: "
          f"{os.getloadavg()[0]:.2f}\n")
    n_datasets, n_points = (int(part) for part in args.small.split(":"))
    seconds, modes = small_tasks(n_datasets, n_points, args.repeats)
    print(f"{n_datasets} datasets of {n_points} points, ExactHierarchicalClustering(), "
          f"n_jobs=2, median of {args.repeats}; fit_many chose {sorted(modes)}\n")
    print("| configuration | workers stopped before (s) | workers running (s) |")
    print("|---|---:|---:|")
    for name, label in (("loop", "plain loop"), ("before", "fit_many before (a task per dataset)"),
                        ("after", "fit_many now")):
        print(f"| {label} | {seconds[name, 'cold']:.2f} | {seconds[name, 'warm']:.2f} |")
    print()
    print("| leaves per jet | jets | configuration | datasets/s |")
    print("|---:|---:|---|---:|")
    for workload in args.jets:
        n_leaves, n_jets = (int(part) for part in workload.split(":"))
        datasets = [jet.momenta for jet in make_jets(n_jets, n_leaves=n_leaves, random_state=0)]
        model = ExactHierarchicalClustering(GinkgoLikelihood(), n_jobs=1)
        threaded = ExactHierarchicalClustering(GinkgoLikelihood(), n_jobs=None)
        rows = [
            ("in-process loop (n_jobs=1)", lambda: throughput(model, datasets, n_jobs=1)),
            ("loky, 2 processes (n_jobs=2)", lambda: throughput(model, datasets, n_jobs=2)),
            ("in-process loop, estimator n_jobs=None (OpenMP threads on all cores)",
             lambda: throughput(threaded, datasets, n_jobs=1)),
        ]
        if use_dask:
            rows += [
                (f"Dask LocalCluster, {n} worker process{'es' if n > 1 else ''}",
                 lambda n=n: dask_throughput(model, datasets, n))
                for n in (1, 2)
            ]
        for name, run in rows:
            print(f"| {n_leaves} | {n_jets} | {name} | {run():.1f} |", flush=True)

if __name__ == "__main__":
    main()

"""What checking a sparse model file costs: pickle.loads with the sparse trellises' checks and
rebuilds (their ``__setstate__``) beside a plain restore of the same bytes, in one run, next to
the fit that made the file.

Run: PYTHONPATH=src python benchmarks/bench_sparse_load.py
"""
import pickle
import time
import warnings

import numpy as np

from sktrellis import SparseTrellisClustering
from sktrellis.energies import Dasgupta, DirichletProcessMixture
from sktrellis import SparseFlatClustering


def mean_seconds(function, repeats=5):
    start = time.perf_counter()
    for _ in range(repeats):
        function()
    return (time.perf_counter() - start) / repeats


def main():
    warnings.simplefilter("ignore")
    X = np.random.default_rng(0).normal(size=(200, 5))
    print("estimator | N | clusters | pickle kB | fit s | load checked s | load plain s | ratio")
    for estimator in (SparseTrellisClustering(Dasgupta(beta=1.0)),
                      SparseFlatClustering(DirichletProcessMixture())):
        start = time.perf_counter()
        model = estimator.fit(X)
        fit = time.perf_counter() - start
        data = pickle.dumps(model)
        trellis_class = type(model._trellis)
        checked = mean_seconds(lambda: pickle.loads(data))
        setstate = trellis_class.__setstate__
        del trellis_class.__setstate__  # the plain restore: the attributes as the file has them
        try:
            plain = mean_seconds(lambda: pickle.loads(data))
        finally:
            trellis_class.__setstate__ = setstate
        print(f"{type(estimator).__name__} | {len(X)} | {model.n_vertices_} | {len(data) // 1024} "
              f"| {fit:.3f} | {checked:.4f} | {plain:.4f} | {checked / plain:.1f}")


if __name__ == "__main__":
    main()

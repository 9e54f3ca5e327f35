"""Resource bounds of issue-35 fixes, each measured against the old behaviour in one run.

1. BayesianHierarchicalClustering with full covariances at 40 x 200: peak
   traced memory with pairs scored in blocks of at most 64 MiB of statistics
   beside the old fixed blocks of 2**15 pairs (its estimate, too).
2. Longest kernel call of a Ginkgo inside pass (what Ctrl-C waits for) with
   calls sized by estimated time (0.25 s) beside the old 2**28 terms.
3. sktrellis.load beside pickle.loads on a fitted model with its tables.

Run: PYTHONPATH=src python benchmarks/bench_trust.py
"""
import io
import pickle
import time
import tracemalloc

import numpy as np

import sktrellis
from sktrellis import ExactHierarchicalClustering
from sktrellis._engine.trellis import hierarchical_trellis, levels
from sktrellis.baselines import BayesianHierarchicalClustering
from sktrellis.baselines._bhc import _recursion
from sktrellis.datasets import make_jets
from sktrellis.energies import Dasgupta, DirichletProcessMixture, GinkgoLikelihood


def bhc_peak(block_bytes, X):
    _recursion._BLOCK_BYTES = block_bytes
    model = BayesianHierarchicalClustering(DirichletProcessMixture(covariance_type="full"),
                                           covariance_type=None)
    tracemalloc.start()
    start = time.perf_counter()
    model.fit(X)
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak, seconds, model._fit_bytes(X, "full")


def longest_call(chunk_seconds, X):
    levels.CHUNK_SECONDS = chunk_seconds
    calls = []
    inside_level = hierarchical_trellis.kernels.inside_level

    def timed(*args):
        start = time.perf_counter()
        result = inside_level(*args)
        calls.append(time.perf_counter() - start)
        return result

    hierarchical_trellis.kernels.inside_level = timed
    try:
        ExactHierarchicalClustering(GinkgoLikelihood(), n_jobs=1, verbose=0).fit(X)
    finally:
        hierarchical_trellis.kernels.inside_level = inside_level
    return max(calls), sum(calls), len(calls)


def main():
    X = np.random.default_rng(0).normal(size=(40, 200))
    new = bhc_peak(64 * 2**20, X)
    old = bhc_peak(2**62, X)
    print(f"BHC full 40 x 200: peak {new[0] / 2**20:.0f} MiB ({new[1]:.1f} s) with 64 MiB "
          f"blocks, {old[0] / 2**20:.0f} MiB ({old[1]:.1f} s) with 2**15-pair blocks "
          f"(ratio {old[0] / new[0]:.2f}); estimate {new[2] / 2**20:.0f} MiB")
    jet = make_jets(1, n_leaves=17, random_state=0)[0]["momenta"]
    new = longest_call(0.25, jet)
    old = longest_call(1e9, jet)
    print(f"Ginkgo N=17 inside pass, one thread: longest kernel call {new[0]:.2f} s of "
          f"{new[1]:.1f} s in {new[2]} calls (time-sized), {old[0]:.2f} s of {old[1]:.1f} s in "
          f"{old[2]} calls (2**28 terms)")
    model = ExactHierarchicalClustering(Dasgupta(beta=1.0)).fit(
        np.random.default_rng(0).normal(size=(18, 2)))
    model.cluster_probability([0, 1])
    data = pickle.dumps(model)
    plain, safe = [], []
    for _ in range(5):  # alternated, best of five each
        start = time.perf_counter()
        pickle.loads(data)
        plain.append(time.perf_counter() - start)
        start = time.perf_counter()
        sktrellis.load(io.BytesIO(data))
        safe.append(time.perf_counter() - start)
    plain, safe = min(plain), min(safe)
    print(f"N=18 model, {len(data) / 1e6:.1f} MB: pickle.loads {plain * 1e3:.1f} ms, "
          f"sktrellis.load {safe * 1e3:.1f} ms (ratio {safe / plain:.1f})")


if __name__ == "__main__":
    main()

"""One exact hierarchical fit at a large N: wall time and peak memory against the estimate.

Run it alone on a quiet machine (it takes minutes and gigabytes):

    python benchmarks/bench_large_fit.py ginkgo 24 marginals  # a jet, then every marginal
    python benchmarks/bench_large_fit.py dasgupta 26          # Gaussian points, MAP, log Z

The estimate is ``hierarchical_fit_bytes(energy, N)``, what the fit refuses by; the
peak is the process's ``ru_maxrss``.
"""
import resource
import sys
import time

import numpy as np

from sktrellis import ExactHierarchicalClustering
from sktrellis._engine.resources import hierarchical_fit_bytes
from sktrellis.datasets import make_jets
from sktrellis.energies import Dasgupta, GinkgoLikelihood

kind, n = sys.argv[1], int(sys.argv[2])
if kind == "ginkgo":
    energy = GinkgoLikelihood()
    X = make_jets(n_leaves=n, random_state=n)[0].momenta
else:
    energy = Dasgupta(beta=1.0)
    X = np.random.default_rng(0).normal(size=(n, 3))
estimate = hierarchical_fit_bytes(energy, n)
model = ExactHierarchicalClustering(energy, labels_from="map_tree", verbose=1)
start = time.perf_counter()
model.fit(X)
fit = time.perf_counter() - start
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(f"{kind} N={n}: fit (MAP, log Z) {fit:.1f} s; log Z {model.log_partition_:.6f}; "
      f"MAP {model.map_log_potential_:.6f}; peak RSS {rss / 2**30:.2f} GiB after fit", flush=True)
if len(sys.argv) > 3:
    start = time.perf_counter()
    model.cluster_probability([0, 1])
    outside = time.perf_counter() - start
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(f"  every cluster marginal {outside:.1f} s; peak RSS {rss / 2**30:.2f} GiB", flush=True)
print(f"  estimated peak (hierarchical_fit_bytes, fit and every query) {estimate / 2**30:.2f} GiB",
      flush=True)

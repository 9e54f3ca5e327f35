"""Beam search and greedy against the exact MAP on toy jets of 5-10 leaves (Table 1).

Greenberg et al. (2021), Table 1, on their Ginkgo510 dataset (5000 Ginkgo
jets of 5 to 10 leaves), report in nats of log likelihood (mean +- std):
trellis - beam 0.4 +- 0.5, trellis - greedy 1.5 +- 1.1, beam - greedy
1.1 +- 1.1. This draws the same number of jets of each size from 5 to 10
with ``sktrellis.datasets.make_jets`` (the Ginkgo process) and compares, under
``GinkgoLikelihood``, the exact MAP of ``ExactHierarchicalClustering`` with
``GreedyHierarchicalClustering`` and three beam searches:

* ``variant="paper", beam_width=None``: the published search (width N(N-1)/2,
  equal likelihoods de-duplicated, the greedy path not kept);
* ``variant="distinct", beam_width=None``: the same width, forests
  de-duplicated by their clusters, the greedy path kept;
* ``variant="distinct"`` at the default width 10.

Prints a Markdown table: mean +- std of each difference, how many jets the
search ended below greedy, and the median time per jet.

    PYTHONPATH=src python benchmarks/bench_beam.py [--jets-per-size 100] [--seed 0]
"""
import argparse
import os
import time

import numpy as np

from sktrellis import ExactHierarchicalClustering
from sktrellis.baselines import BeamSearchHierarchicalClustering, GreedyHierarchicalClustering
from sktrellis.datasets import make_jets
from sktrellis.energies import GinkgoLikelihood

PUBLISHED = {"trellis - beam": "0.4 +- 0.5", "trellis - greedy": "1.5 +- 1.1",
             "beam - greedy": "1.1 +- 1.1"}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jets-per-size", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    energy = GinkgoLikelihood()
    searches = {
        "greedy": GreedyHierarchicalClustering(energy),
        'beam, variant="paper", width N(N-1)/2': BeamSearchHierarchicalClustering(
            energy, beam_width=None, variant="paper"),
        'beam, variant="distinct", width N(N-1)/2': BeamSearchHierarchicalClustering(
            energy, beam_width=None),
        'beam, variant="distinct", width 10 (default)': BeamSearchHierarchicalClustering(
            energy, beam_width=10),
    }
    exact = ExactHierarchicalClustering(energy, n_jobs=1)
    values = {name: [] for name in ["trellis", *searches]}
    seconds = {name: [] for name in searches}
    sizes = range(5, 11)
    for n_leaves in sizes:
        for jet in make_jets(args.jets_per_size, n_leaves=n_leaves,
                             random_state=args.seed + n_leaves):
            values["trellis"].append(exact.fit(jet.momenta).map_log_potential_)
            for name, search in searches.items():
                start = time.perf_counter()
                values[name].append(search.fit(jet.momenta).map_log_potential_)
                seconds[name].append(time.perf_counter() - start)
    values = {name: np.array(v) for name, v in values.items()}
    n_jets = len(values["trellis"])

    def stat(difference):
        return f"{difference.mean():.2f} +- {difference.std():.2f}"

    print(f"{n_jets} jets, {args.jets_per_size} of each size 5..10, seed {args.seed}; "
          f"load average {os.getloadavg()[0]:.2f}\n")
    print("| search | trellis - search | search - greedy | below greedy | "
          "median s/jet |")
    print("|---|---:|---:|---:|---:|")
    for name in searches:
        below = int(np.sum(values[name] < values["greedy"] - 1e-9))
        print(f"| {name} | {stat(values['trellis'] - values[name])} | "
              f"{stat(values[name] - values['greedy'])} | {below}/{n_jets} | "
              f"{np.median(seconds[name]):.4f} |")
    print("\nPublished (Table 1, Ginkgo510): "
          + ", ".join(f"{k} {v}" for k, v in PUBLISHED.items()))


if __name__ == "__main__":
    main()

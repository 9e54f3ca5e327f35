"""Does TransitivePropagation converge at the noise levels of Kumar & Levy's Fig. 4?

Noisy reads of K random 30-bit templates (``make_bit_patterns``, 10 reads
each) at bit-error rates p_e = 0.10, 0.125, 0.15; for each run: whether the
stopping rule was met (``converged_``), iterations, the damping reached
(``damping_``), clusters found, and the objective (sum of log f0/f1 inside
clusters) against the templates' own partition. Compares a fixed damping
(--damping, e.g. the former default 0.5) with the default ``damping="auto"``.

    PYTHONPATH=src python benchmarks/bench_tp_convergence.py --templates 10 20 --seeds 6
"""
import argparse
import time
import warnings

import numpy as np

from sktrellis.baselines import TransitivePropagation
from sktrellis.datasets import make_bit_patterns


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--templates", type=int, nargs="+", default=[10, 20])
    parser.add_argument("--error-rates", type=float, nargs="+", default=[0.10, 0.125, 0.15])
    parser.add_argument("--seeds", type=int, default=6)
    parser.add_argument("--damping", type=float, default=0.5)
    args = parser.parse_args()
    print("| K | p_e | damping | converged | iterations (max) | damping_ reached | "
          "clusters | objective / templates' (min) | s/run |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n_templates in args.templates:
        for error_rate in args.error_rates:
            for damping in (args.damping, "auto"):
                rows = []
                for seed in range(args.seeds):
                    _, labels, llr = make_bit_patterns(n_templates, error_rate=error_rate,
                                                       random_state=seed)
                    together = labels[:, None] == labels[None, :]
                    truth = np.triu(np.where(together, llr, 0.0), 1).sum()
                    start = time.perf_counter()
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        model = TransitivePropagation(damping=damping).fit(llr)
                    rows.append((model.converged_, model.n_iter_, model.damping_,
                                 model.labels_.max() + 1, model.objective_ / truth,
                                 time.perf_counter() - start))
                converged, iters, reached, clusters, ratio, seconds = map(np.array, zip(*rows))
                print(f"| {n_templates} | {error_rate} | {damping} | "
                      f"{converged.sum()}/{len(rows)} | {iters.mean():.0f} ({iters.max()}) | "
                      f"{reached.max():.3g} | {clusters.mean():.1f} | "
                      f"{ratio.mean():.3f} ({ratio.min():.3f}) | {seconds.mean():.1f} |",
                      flush=True)


if __name__ == "__main__":
    main()

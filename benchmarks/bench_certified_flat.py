"""CertifiedFlatClustering on the transitive-propagation paper's K-populations data.

Noisy reads of K random templates of L = 30 bits (Kumar & Levy 2015,
``sktrellis.datasets.make_bit_patterns``, 5 reads per template), N = 50 to
250 reads, each bit flipped with probability p_e. Every method maximises
the same objective, the sum of the log likelihood ratios log f0/f1 over
the pairs inside clusters:

- certified: ``CertifiedFlatClustering(CorrelationClustering(affinity=
  "precomputed", beta=1))`` under ``--max-time`` seconds; its gap is 0 when
  the partition is proven optimal, else the certified distance to the
  optimum's upper bound;
- TP: ``TransitivePropagation()`` (max-sum message passing);
- greedy: merge the two clusters of largest positive cross weight until
  none is positive (the certified solver's first incumbent).

For each method: the objective, its distance below the certified upper
bound (so 0.0 for a proven optimum), the adjusted Rand index against the
templates, the number of clusters and seconds, all timed in the same run
(loaded 2-core machine: compare the ratios, not the absolute seconds).

    python benchmarks/bench_certified_flat.py                 # about 3 minutes
    python benchmarks/bench_certified_flat.py --sizes 50 100 --error-rates 0.1
"""
import argparse
import time
import warnings

from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import adjusted_rand_score

from sktrellis import CertifiedFlatClustering
from sktrellis._engine.multicut import greedy_partition, partition_objective
from sktrellis.baselines import TransitivePropagation
from sktrellis.datasets import make_bit_patterns
from sktrellis.energies import CorrelationClustering

READS_PER_TEMPLATE = 5


def timed(fit):
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        result = fit()
    return result, time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[50, 100, 250])
    parser.add_argument("--error-rates", type=float, nargs="+", default=[0.05, 0.10, 0.15])
    parser.add_argument("--max-time", type=float, default=30.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    energy = CorrelationClustering(affinity="precomputed", beta=1.0)
    print(f"K-populations data, {READS_PER_TEMPLATE} reads per template, L = 30 bits; "
          f"certified max_time = {args.max_time:g} s; gap = certified upper bound - objective")
    print(f"{'N':>4} {'p_e':>5} {'method':>10} {'objective':>11} {'gap':>9} {'ARI':>6} "
          f"{'clusters':>8} {'seconds':>8} {'rounds':>6} {'triangles':>9}")
    for n_points in args.sizes:
        for error_rate in args.error_rates:
            _, truth, llr = make_bit_patterns(
                n_points // READS_PER_TEMPLATE, reads_per_template=READS_PER_TEMPLATE,
                error_rate=error_rate, random_state=args.seed,
            )
            model, certified_s = timed(
                lambda: CertifiedFlatClustering(energy, max_time=args.max_time).fit(llr)
            )
            tp, tp_s = timed(lambda: TransitivePropagation().fit(llr))
            greedy, greedy_s = timed(lambda: greedy_partition(llr))
            bound = model.log_potential_upper_bound_
            rows = [
                ("certified", model.labels_, certified_s,
                 f"{model.n_iter_:>6} {model.n_constraints_:>9}"),
                ("TP", tp.labels_, tp_s, f"{tp.n_iter_:>6} {'':>9}"),
                ("greedy", greedy, greedy_s, ""),
            ]
            for name, labels, seconds, extra in rows:
                objective = partition_objective(llr, labels)
                print(f"{n_points:>4} {error_rate:>5.2f} {name:>10} {objective:>11.2f} "
                      f"{bound - objective:>9.2f} {adjusted_rand_score(truth, labels):>6.3f} "
                      f"{labels.max() + 1:>8} {seconds:>8.2f} {extra}", flush=True)


if __name__ == "__main__":
    main()

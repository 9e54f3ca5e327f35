"""Sparse flat trellis: gap to the exact posterior, and MAP partitions past the trellis.

(a) N = 14-18 blobs, correlation clustering (beta = 1 and 4): the gap of the
    sparse flat trellis's log Z and MAP to ``ExactFlatClustering``'s
    against the family size (seed trees only, then growing with regions of
    up to 3, 4, 6 parts), with the fraction of the Bell(N) partitions
    spanned.
(b) N = 200-2,000 blobs, signed weights (exponential similarities minus
    their mean): the MAP objective (the weight inside clusters) and time of
    a greedy flat agglomeration, the best cut of scipy's linkage trees,
    TransitivePropagation (max-sum, up to ``--max-tp`` points),
    SparseFlatClustering seeded with the linkage trees only (``builder``
    callable) and SparseFlatClustering at its defaults (the linkage trees
    and the greedy agglomeration's tree), timed side by side in one run.
(c) DPM (full covariance, BHC's hyperparameters) on blobs: BHC's evidence
    lower bound (the cuts of its tree) against SparseFlatClustering's
    ``log_evidence_`` (default seeds; and seeded with BHC's own tree, so
    never below BHC's bound).
(d) ``--coclustering``: co-clustering probabilities (``pairwise_probability_``)
    of SparseFlatClustering (defaults) against Perturb-and-MAP's, on planted
    blobs and on structureless data (uniform in a square), at fixed betas.
    At N = 12-16 both are compared with ``ExactFlatClustering``'s exact
    matrix: mean and largest absolute error over the pairs, the mean signed
    error, and a calibration summary (pairs binned by predicted
    probability: the size-weighted mean over the bins of |mean predicted -
    mean exact|), and the share of pairs on the other side of 1/2.
    Perturb-and-MAP runs twice there: ``PerturbAndMAPClustering`` (exact
    MAP of each perturbed problem, O(3**N)) and the same perturbations
    with the greedy agglomeration as MAP solver, the only form that runs
    past the trellis; a single-site Gibbs sampler of the same posterior
    (two chains) is checked against the exact matrix as well. At
    N = 200-500 there is no exact reference: the pairwise agreement of
    SparseFlatClustering, greedy Perturb-and-MAP and Gibbs, with the two
    Gibbs chains' disagreement as its mixing diagnostic.

    python benchmarks/bench_sparse_flat.py
    python benchmarks/bench_sparse_flat.py --exact-sizes 14 --sizes 200 500
    python benchmarks/bench_sparse_flat.py --exact-sizes --evidence-sizes --sizes 200 500 1000
    python benchmarks/bench_sparse_flat.py --coclustering    # (d) only, a few minutes
"""
import argparse
import time

import numpy as np
from scipy.cluster.hierarchy import linkage
from scipy.spatial.distance import squareform
from sklearn.datasets import make_blobs

from sktrellis import ExactFlatClustering, SparseFlatClustering
from sktrellis._engine.multicut import greedy_agglomeration
from sktrellis.baselines import (
    BayesianHierarchicalClustering,
    PerturbAndMAPClustering,
    TransitivePropagation,
)
from sktrellis.baselines._perturb_and_map import perturbations
from sktrellis.energies import CorrelationClustering, DirichletProcessMixture


def bell(n):
    row = [1]
    for _ in range(n):
        new = [row[-1]]
        for value in row:
            new.append(new[-1] + value)
        row = new
    return row[0]


def exact_table(sizes, seed, betas):
    print("(a) gap to the exact posterior (CorrelationClustering on blobs)")
    print(f"{'beta':>4} {'N':>3} {'family':>10} {'clusters':>8} {'states':>7} {'spanned':>9} "
          f"{'log Z gap':>10} {'MAP gap':>8} {'sparse s':>9} {'exact s':>8}")
    settings = {"seeds": {"resplit_parts": 0}, "grow 3": {"resplit_parts": 3},
                "grow 4": {"resplit_parts": 4}, "grow 6": {"resplit_parts": 6}}
    for beta, n_points in [(beta, n) for beta in betas for n in sizes]:
        X, _ = make_blobs(n_samples=n_points, centers=4, cluster_std=2.0, random_state=seed)
        energy = CorrelationClustering(beta=beta)
        start = time.perf_counter()
        exact = ExactFlatClustering(energy, verbose=0).fit(X)
        exact_seconds = time.perf_counter() - start
        for name, params in settings.items():
            start = time.perf_counter()
            model = SparseFlatClustering(energy, **params).fit(X)
            seconds = time.perf_counter() - start
            print(f"{beta:>4g} {n_points:>3} {name:>10} {model.n_vertices_:>8} {model.n_states_:>7} "
                  f"{model.n_partitions_ / bell(n_points):>9.2e} "
                  f"{exact.log_partition_ - model.log_partition_:>10.3f} "
                  f"{exact.map_log_potential_ - model.map_log_potential_:>8.3f} "
                  f"{seconds:>9.2f} {exact_seconds:>8.2f}")


def objective(weights, labels):
    together = labels[:, None] == labels[None, :]
    return 0.5 * float(weights[together].sum())


def linkage_trees(weights):
    """The linkage seeds of the estimator's default, without the greedy tree."""
    distances = weights.max() - weights
    np.fill_diagonal(distances, 0.0)
    condensed = squareform(distances, checks=False)
    return [linkage(condensed, method)[:, :2].astype(np.int64)
            for method in ("average", "complete", "single")]


def scaling_table(sizes, seed, max_tp):
    print("(b) MAP objective (weight inside clusters, higher is better) and seconds")
    print(f"{'N':>5} {'greedy':>17} {'best linkage cut':>17} {'TransitiveProp':>17} "
          f"{'linkage seeds':>17} {'SparseFlat':>17} {'states':>7}")
    for n_points in sizes:
        X, _ = make_blobs(n_samples=n_points, centers=max(3, n_points // 50),
                          cluster_std=2.0, random_state=seed)
        weights = CorrelationClustering().weights(X)
        energy = CorrelationClustering(affinity="precomputed", beta=1.0)
        row = {}
        start = time.perf_counter()
        greedy_labels = greedy_agglomeration(weights).labels
        row["greedy"] = objective(weights, greedy_labels), time.perf_counter() - start
        start = time.perf_counter()
        cuts = SparseFlatClustering(
            energy, builder=lambda W, rs: linkage_trees(W), resplit_parts=0).fit(weights)
        row["cuts"] = cuts.map_log_potential_, time.perf_counter() - start
        if n_points <= max_tp:
            start = time.perf_counter()
            tp = TransitivePropagation().fit(weights)
            row["tp"] = objective(weights, tp.labels_), time.perf_counter() - start
        else:
            row["tp"] = np.nan, np.nan
        # The linkage trees alone as seeds (the default before the greedy
        # tree joined it), then the default: linkage trees and greedy tree.
        start = time.perf_counter()
        linkage_only = SparseFlatClustering(
            energy, builder=lambda W, rs: linkage_trees(W)).fit(weights)
        row["linkage"] = linkage_only.map_log_potential_, time.perf_counter() - start
        start = time.perf_counter()
        model = SparseFlatClustering(energy).fit(weights)
        row["sparse"] = model.map_log_potential_, time.perf_counter() - start
        assert abs(objective(weights, model.labels_) - model.map_log_potential_) < 1e-6 * (
            1 + abs(model.map_log_potential_))
        cells = " ".join(f"{value:>10.1f} {seconds:>6.2f}s" for value, seconds in row.values())
        print(f"{n_points:>5} {cells} {model.n_states_:>7}", flush=True)


def evidence_table(sizes, seed):
    print("(c) DPM evidence lower bounds on blobs (higher is tighter) and seconds")
    print(f"{'N':>5} {'BHC bound':>18} {'SparseFlat':>18} {'+ BHC tree':>18}")
    for n_points in sizes:
        X, _ = make_blobs(n_samples=n_points, centers=5, random_state=seed)
        start = time.perf_counter()
        bhc = BayesianHierarchicalClustering(DirichletProcessMixture(covariance_type="full"),
                                             covariance_type=None).fit(X)
        row = [(bhc.log_evidence_lower_bound_, time.perf_counter() - start)]
        start = time.perf_counter()
        model = SparseFlatClustering(bhc.energy_).fit(X)
        row.append((model.log_evidence_, time.perf_counter() - start))
        start = time.perf_counter()
        seeded = SparseFlatClustering(
            bhc.energy_, builder=lambda X, rs: [bhc.linkage_matrix_]).fit(X)
        row.append((seeded.log_evidence_, time.perf_counter() - start))
        cells = " ".join(f"{value:>10.2f} {seconds:>6.2f}s" for value, seconds in row)
        print(f"{n_points:>5} {cells}", flush=True)


def blobs_or_noise(kind, n_points, seed):
    """Planted blobs (about N / 4 points each, N / 50 past 200) or uniform noise."""
    if kind == "blobs":
        X, _ = make_blobs(n_samples=n_points, centers=max(4, n_points // 50),
                          cluster_std=1.0, center_box=(-10, 10), random_state=seed)
        return X
    return np.random.default_rng(seed).uniform(-10, 10, size=(n_points, 2))


def greedy_perturb_and_map(weights, beta, n_draws, seed):
    """Perturb-and-MAP with the greedy agglomeration as the MAP solver.

    The perturbations of ``PerturbAndMAPClustering`` (one logistic variable
    per pair, from the same ``perturbations`` helper); each perturbed problem
    is solved approximately, as Kappes et al. solve theirs with heuristic
    multicut solvers, since the exact MAP is O(3**N).
    """
    n_points = len(weights)
    rng = np.random.RandomState(seed)
    rows, columns = np.triu_indices(n_points, 1)
    together = np.zeros((n_points, n_points))
    for _ in range(n_draws):
        same, different = perturbations(len(rows), rng)
        perturbed = beta * weights
        perturbed[rows, columns] += same - different
        perturbed[columns, rows] = perturbed[rows, columns]
        labels = greedy_agglomeration(perturbed).labels
        together += labels[:, None] == labels[None, :]
    return together / n_draws


def coclustering_errors(estimate, exact, n_bins=10):
    """Mean, max and mean signed error over the pairs, a calibration error,
    and the share of pairs on the other side of 1/2 than the exact marginal.

    The calibration error bins the pairs by the estimated probability and
    averages, weighted by bin size, |mean estimate - mean exact| per bin:
    the expected calibration error with the exact marginal as the outcome.
    """
    upper = np.triu_indices(len(exact), 1)
    estimate, exact = estimate[upper], exact[upper]
    error = estimate - exact
    bins = np.minimum((estimate * n_bins).astype(int), n_bins - 1)
    calibration = sum(
        abs(error[bins == b].mean()) * np.mean(bins == b)
        for b in range(n_bins) if np.any(bins == b))
    return (np.abs(error).mean(), np.abs(error).max(), error.mean(), calibration,
            np.mean((estimate > 0.5) != (exact > 0.5)))


def agreement(first, second):
    """Mean and max |difference| over the pairs, and the share of pairs on
    opposite sides of 1/2."""
    upper = np.triu_indices(len(first), 1)
    first, second = first[upper], second[upper]
    return (np.abs(first - second).mean(), np.abs(first - second).max(),
            np.mean((first > 0.5) != (second > 0.5)))


def gibbs_coclustering(weights, beta, n_sweeps, seed):
    """Co-clustering by single-site Gibbs sampling, two chains.

    Each step moves one point to an existing cluster c with log weight
    ``beta * sum of w_ij over j in c`` or to a new cluster with log weight 0:
    the exact conditional of the correlation clustering posterior, so the
    chain targets the same distribution as ``ExactFlatClustering``. One chain
    starts from singletons, the other from one cluster; each discards its
    first fifth. Returns the pooled estimate and the mean |difference|
    between the two chains' estimates (a mixing diagnostic: large means
    the chains have not forgotten where they started).
    """
    n_points = len(weights)
    log_potential = beta * weights
    np.fill_diagonal(log_potential, 0.0)
    rng = np.random.default_rng(seed)
    burn_in = n_sweeps // 5
    estimates = []
    for labels in (np.arange(n_points), np.zeros(n_points, dtype=np.int64)):
        labels = labels.copy()
        sizes = np.bincount(labels, minlength=n_points)
        together = np.zeros((n_points, n_points))
        for sweep in range(n_sweeps):
            for point in range(n_points):
                sizes[labels[point]] -= 1
                scores = np.bincount(labels, weights=log_potential[point],
                                     minlength=n_points)
                occupied = sizes > 0
                # The new-cluster option: one empty slot, log weight 0.
                empty = np.flatnonzero(~occupied)[0]
                scores[~occupied] = -np.inf
                scores[empty] = 0.0
                choice = np.argmax(scores + rng.gumbel(size=n_points))
                labels[point] = choice
                sizes[choice] += 1
            if sweep >= burn_in:
                together += labels[:, None] == labels[None, :]
        estimates.append(together / (n_sweeps - burn_in))
    return (estimates[0] + estimates[1]) / 2, agreement(*estimates)[0]


def coclustering_table(exact_sizes, sizes, betas, draws, sweeps, seed):
    print(f"(d) co-clustering against the exact matrix (mean |err|, max |err|, "
          f"mean signed err, calibration err, share of pairs on the other side of 1/2; seconds); Perturb-and-MAP {draws} draws")
    print(f"{'data':>6} {'beta':>4} {'N':>3} {'method':>14} {'mean':>6} {'max':>6} "
          f"{'signed':>7} {'calib':>6} {'split':>6} {'s':>7}")
    for kind in ("blobs", "noise"):
        for beta in betas:
            for n_points in exact_sizes:
                X = blobs_or_noise(kind, n_points, seed)
                weights = CorrelationClustering().weights(X)
                energy = CorrelationClustering(affinity="precomputed", beta=beta)
                start = time.perf_counter()
                exact = ExactFlatClustering(energy, verbose=0).fit(weights)
                rows = {"exact": (None, time.perf_counter() - start)}
                start = time.perf_counter()
                sparse = SparseFlatClustering(energy, random_state=seed).fit(weights)
                rows["SparseFlat"] = (sparse.pairwise_probability_,
                                      time.perf_counter() - start)
                start = time.perf_counter()
                pam = PerturbAndMAPClustering(beta=beta, n_perturbations=draws,
                                              random_state=seed).fit(weights)
                rows["P&M exact MAP"] = (pam.pairwise_probability_,
                                         time.perf_counter() - start)
                start = time.perf_counter()
                greedy = greedy_perturb_and_map(weights, beta, draws, seed)
                rows["P&M greedy"] = (greedy, time.perf_counter() - start)
                start = time.perf_counter()
                gibbs, _ = gibbs_coclustering(weights, beta, sweeps, seed)
                rows["Gibbs"] = (gibbs, time.perf_counter() - start)
                for method, (estimate, seconds) in rows.items():
                    cells = (" ".join(f"{v:>{w}.3f}" for v, w in zip(
                        coclustering_errors(estimate, exact.pairwise_probability_),
                        (6, 6, 7, 6, 6))) if estimate is not None else f"{'':>35}")
                    print(f"{kind:>6} {beta:>4g} {n_points:>3} {method:>14} {cells} "
                          f"{seconds:>7.2f}", flush=True)
    print("(d) past the trellis, no exact reference: pairwise agreement (mean |diff|, share "
          "of pairs on opposite sides of 1/2) of SparseFlat (SF), greedy Perturb-and-MAP "
          "(P&M) and Gibbs (two chains; 'chains' is their mean |diff|), and seconds")
    print(f"{'data':>6} {'beta':>4} {'N':>4} {'SF-P&M':>13} {'SF-Gibbs':>13} "
          f"{'P&M-Gibbs':>13} {'chains':>6} {'SF s':>6} {'P&M s':>6} {'Gibbs s':>7}")
    for kind in ("blobs", "noise"):
        for beta in betas:
            for n_points in sizes:
                X = blobs_or_noise(kind, n_points, seed)
                weights = CorrelationClustering().weights(X)
                energy = CorrelationClustering(affinity="precomputed", beta=beta)
                start = time.perf_counter()
                sparse = SparseFlatClustering(energy, random_state=seed).fit(weights)
                sparse_seconds = time.perf_counter() - start
                start = time.perf_counter()
                greedy = greedy_perturb_and_map(weights, beta, draws, seed)
                greedy_seconds = time.perf_counter() - start
                start = time.perf_counter()
                gibbs, chains = gibbs_coclustering(weights, beta, sweeps, seed)
                gibbs_seconds = time.perf_counter() - start
                cells = " ".join(
                    f"{mean:>6.3f} {split:>6.3f}" for mean, _, split in (
                        agreement(sparse.pairwise_probability_, greedy),
                        agreement(sparse.pairwise_probability_, gibbs),
                        agreement(greedy, gibbs)))
                print(f"{kind:>6} {beta:>4g} {n_points:>4} {cells} {chains:>6.3f} "
                      f"{sparse_seconds:>6.2f} {greedy_seconds:>6.2f} {gibbs_seconds:>7.2f}",
                      flush=True)

def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exact-sizes", type=int, nargs="*", default=[14, 16, 18])
    parser.add_argument("--betas", type=float, nargs="*", default=[1.0, 4.0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[200, 500, 1000, 2000])
    parser.add_argument("--evidence-sizes", type=int, nargs="*", default=[100, 300])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-tp", type=int, default=500,
                        help="largest N for TransitivePropagation (O(N**3) per iteration)")
    parser.add_argument("--coclustering", action="store_true",
                        help="run (d) only: co-clustering against Perturb-and-MAP")
    parser.add_argument("--coclustering-exact-sizes", type=int, nargs="*", default=[12, 14, 16])
    parser.add_argument("--coclustering-sizes", type=int, nargs="*", default=[200, 500])
    parser.add_argument("--coclustering-betas", type=float, nargs="*", default=[1.0, 4.0])
    parser.add_argument("--draws", type=int, default=100,
                        help="Perturb-and-MAP draws in (d)")
    parser.add_argument("--sweeps", type=int, default=500,
                        help="Gibbs sweeps per chain in (d)")
    args = parser.parse_args()
    if args.coclustering:
        coclustering_table(args.coclustering_exact_sizes, args.coclustering_sizes,
                           args.coclustering_betas, args.draws, args.sweeps, args.seed)
        return
    exact_table(args.exact_sizes, args.seed, args.betas)
    scaling_table(args.sizes, args.seed, args.max_tp)
    evidence_table(args.evidence_sizes, args.seed)


if __name__ == "__main__":
    main()

"""Clade support of sktrellis next to R's pvclust on the same data (issue 19).

Two datasets of 14 samples x 3000 genes: the planted subtypes of issue 19
(its exact reproduction, seed 7) and i.i.d. normal noise. For each, the
samples are clustered by

- sktrellis: ``ExactHierarchicalClustering()`` (Dasgupta, ``beta="auto"``),
  the exact posterior probability of every clade at the calibrated
  ``beta_``, and at beta = 1 for contrast;
- pvclust (Suzuki & Shimodaira 2006): average linkage on correlation
  distance, multiscale bootstrap over the genes; BP (bootstrap probability)
  and AU (approximately unbiased p-value, in %) of every clade of its tree.

The script writes the genes x samples matrix to CSV, runs ``Rscript``,
reads AU/BP back and prints, for every clade of either tree with 2..N-1
samples, both numbers (blank when the clade is not in that tree). It skips
with a message when R or pvclust is not installed (Debian:
``apt-get install r-cran-pvclust``). ``--plot`` saves the sktrellis
dendrograms with their support (the figure of the user guide).

    python benchmarks/compare_pvclust.py --nboot 1000 --plot doc/_static/pvclust_comparison.png
"""
import argparse
import csv
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

from sktrellis import ExactHierarchicalClustering
from sktrellis.energies import Dasgupta

R_SCRIPT = r"""
suppressMessages(library(pvclust))
args <- commandArgs(trailingOnly = TRUE)
data <- read.csv(args[1], check.names = FALSE)
set.seed(as.integer(args[4]))
fit <- pvclust(data, method.hclust = "average", method.dist = "correlation",
               nboot = as.integer(args[3]), quiet = TRUE)
merge <- fit$hclust$merge
members <- vector("list", nrow(merge))
for (i in seq_len(nrow(merge))) {
  side <- function(k) if (k < 0) -k else members[[k]]
  members[[i]] <- sort(c(side(merge[i, 1]), side(merge[i, 2])))
}
out <- data.frame(members = sapply(members, function(m) paste(m - 1, collapse = ";")),
                  au = fit$edges$au, bp = fit$edges$bp)
write.csv(out, args[2], row.names = FALSE)
"""


def issue_data():
    """The reproduction of issue 19: 14 samples in subtypes of 5, 5, 4."""
    rng = np.random.default_rng(7)
    groups = np.repeat([0, 1, 2], [5, 5, 4])
    X = rng.normal(6, 2, size=3000) + rng.normal(0, 0.8, size=(14, 3000))
    for k in range(3):
        idx = rng.choice(3000, 150, replace=False)
        X[np.ix_(groups == k, idx)] += rng.choice([-1.5, 1.5], size=150)
    return X, groups


def run_pvclust(X, nboot, seed, folder):
    """{frozenset of sample indices: (AU, BP)} of pvclust's tree, or None without R."""
    rscript = shutil.which("Rscript")
    if rscript is None:
        return None
    data_path = os.path.join(folder, "data.csv")
    out_path = os.path.join(folder, "pvclust.csv")
    script_path = os.path.join(folder, "run.R")
    with open(script_path, "w") as stream:
        stream.write(R_SCRIPT)
    # pvclust clusters the columns: samples as columns, genes as rows.
    np.savetxt(data_path, X.T, delimiter=",", comments="",
               header=",".join(f"s{i}" for i in range(len(X))))
    result = subprocess.run([rscript, script_path, data_path, out_path, str(nboot), str(seed)],
                            capture_output=True, text=True)
    if result.returncode != 0:
        if "pvclust" in result.stderr and "no package" in result.stderr:
            return None
        raise RuntimeError(f"Rscript failed:\n{result.stderr}")
    support = {}
    with open(out_path, newline="") as stream:
        for row in csv.DictReader(stream):
            members = frozenset(int(i) for i in row["members"].split(";"))
            support[members] = (100 * float(row["au"]), 100 * float(row["bp"]))
    return support


def clades(model):
    """{frozenset: support} of the MAP tree's clusters of 2..N-1 samples."""
    support = model.clade_support()
    return {frozenset(m.tolist()): p
            for m, p in zip(model.tree_.clusters(), support) if 1 < len(m) < model.n_leaves_}


def compare(name, X, pvclust):
    model = ExactHierarchicalClustering().fit(X)
    cold = ExactHierarchicalClustering(Dasgupta(beta=1.0)).fit(X)
    ours = clades(model)
    print(f"\n{name}: beta_ = {model.beta_:.3g}")
    keys = set(ours) | (set(pvclust) if pvclust else set())
    keys = sorted((k for k in keys if 1 < len(k) < len(X)), key=lambda k: (len(k), sorted(k)))
    print(f"{'clade':<40} {'sktrellis':>9} {'beta=1':>7} {'pv AU':>6} {'pv BP':>6}")
    for clade in keys:
        members = sorted(clade)
        in_map = f"{ours[clade]:.3f}" if clade in ours else "(not in MAP)"
        if clade not in ours:
            in_map = f"{model.cluster_probability(members):.3f}*"
        au, bp = pvclust.get(clade, (None, None)) if pvclust else (None, None)
        pv = f"{au:6.0f} {bp:6.0f}" if au is not None else f"{'':>6} {'':>6}"
        label = "{" + ",".join(map(str, members)) + "}"
        print(f"{label:<40} {in_map:>9} {cold.cluster_probability(members):>7.3f} {pv}")
    print("(* a clade of pvclust's tree only: its posterior probability, not in the MAP tree)")
    return model


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nboot", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--plot", metavar="PNG")
    args = parser.parse_args()
    planted, groups = issue_data()
    null = np.random.default_rng(7).normal(size=(14, 3000))
    with tempfile.TemporaryDirectory() as folder:
        pv_planted = run_pvclust(planted, args.nboot, args.seed, folder)
        pv_null = run_pvclust(null, args.nboot, args.seed, folder) if pv_planted else None
    if pv_planted is None:
        print("skipped pvclust: Rscript or the pvclust package is not installed "
              "(Debian: apt-get install r-cran-pvclust); sktrellis numbers only")
    print(f"planted subtypes: samples 0-4, 5-9, 10-13; pvclust nboot={args.nboot}")
    models = [compare("planted subtypes (issue 19)", planted, pv_planted),
              compare("i.i.d. normal noise", null, pv_null)]
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        from sktrellis.plotting import plot_dendrogram

        figure, axes = plt.subplots(1, 2, figsize=(10, 3.6))
        for ax, model, title in zip(axes, models, ["planted subtypes", "noise"]):
            plot_dendrogram(model, ax=ax, labels=[str(i) for i in range(14)])
            ax.set_title(f"{title}: clade support at beta_ = {model.beta_:.3g}")
            ax.set_yticks([])
        figure.tight_layout()
        figure.savefig(args.plot, dpi=80)
        print(f"figure saved to {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Command line: exact hierarchical clustering of a CSV file or the bundled iris subset.

    python -m sktrellis                      # the bundled 12-flower iris subset
    python -m sktrellis data.csv --plot tree.png

Numeric columns are the features; a non-numeric column, if any, names the
rows. The estimator is the Python API's, with its defaults:
``ExactHierarchicalClustering(Dasgupta())``, Dasgupta's cost on RBF
similarities with the temperature ``beta="auto"`` calibrated by a bootstrap
over the features (or the Ginkgo jet likelihood with ``--energy ginkgo``,
for columns E, px, py, pz). ``--standardize`` scales every feature to unit
variance first; ``--beta`` fixes the temperature.
"""
import argparse
import csv
import os
import sys
import time

import numpy as np

from . import ExactHierarchicalClustering
from ._engine.tree.conversion import to_newick
from ._validation import MAX_EXACT_POINTS, unit_exponent
from .datasets import load_iris12
from .energies import CorrelationClustering, Dasgupta, GinkgoLikelihood

# Built exactly as the Python API's defaults; beta "auto" unless --beta.
_ENERGIES = {
    "dasgupta": lambda beta: Dasgupta(beta=beta),
    "hcc": lambda beta: CorrelationClustering(beta=beta),
    "ginkgo": lambda beta: GinkgoLikelihood(),
}


def read_table(path):
    """Features and row names of a CSV file with a header row.

    A column is numeric when every cell is a number; a column with any other
    text names the rows (the first such column). A numeric column with an
    empty cell is an error naming the cell: missing values are not guessed.
    """
    try:
        with open(path, newline="") as stream:
            rows = [row for row in csv.reader(stream) if row]
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"cannot read {path!r}: {error}") from None
    if len(rows) < 2:
        raise ValueError(f"{path!r} has no data rows below its header row")
    header, body = rows[0], rows[1:]
    for line, row in enumerate(body, start=2):
        if len(row) != len(header):
            raise ValueError(
                f"{path!r} line {line}: {len(row)} fields, but the header has {len(header)}"
            )

    def is_number(cell):
        try:
            float(cell)
            return True
        except ValueError:
            return False

    numeric, text = [], []
    for column in range(len(header)):
        cells = [row[column].strip() for row in body]
        if all(is_number(cell) for cell in cells if cell):
            numeric.append(column)
            blank = [line for line, cell in enumerate(cells, start=2) if not cell]
            if blank:
                raise ValueError(
                    f"{path!r} line {blank[0]}, column {header[column]!r}: missing value; "
                    "fill it in or remove the row (sktrellis does not impute)"
                )
            infinite = [(line, cell) for line, cell in enumerate(cells, start=2)
                        if not np.isfinite(float(cell))]
            if infinite:
                line, cell = infinite[0]
                raise ValueError(
                    f"{path!r} line {line}, column {header[column]!r}: {cell!r} is not a "
                    "finite number (NaN, infinity, or beyond float64's 1.8e308); fix or "
                    "remove the row"
                )
        else:
            text.append(column)
    if not numeric:
        raise ValueError(f"{path!r} has no numeric column")
    names = [row[text[0]] for row in body] if text else [str(i) for i in range(len(body))]
    data = np.array([[float(row[c]) for c in numeric] for row in body])
    return data, names


def _positive_int(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def _program_name():
    # "python -m sktrellis" runs __main__.py; the console script is "sktrellis".
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return "python -m sktrellis" if name in ("", "__main__.py", "-m") else name


def build_parser():
    parser = argparse.ArgumentParser(
        prog=_program_name(),
        description="Exact hierarchical clustering (cluster trellis) of a small dataset: "
        "the MAP tree, log Z, and the most probable clusters.",
    )
    parser.add_argument("csv", nargs="?", help="CSV file with a header row "
                        "(default: the bundled 12-flower iris subset)")
    parser.add_argument("--energy", choices=sorted(_ENERGIES), default="dasgupta")
    parser.add_argument("--beta", type=float, default=None,
                        help="inverse temperature of dasgupta and hcc (default: calibrated "
                        "from the data, beta='auto', as in the Python API)")
    parser.add_argument("--standardize", action="store_true",
                        help="scale every feature to zero mean and unit variance first")
    parser.add_argument("--n-clusters", type=_positive_int, default=3,
                        help="clusters of the flat cut")
    parser.add_argument("--top", type=_positive_int, default=8,
                        help="how many probable clusters to list")
    parser.add_argument("--plot", metavar="PNG", help="save a dendrogram of the MAP tree")
    return parser


def check_arguments(parser, args):
    """Refuse combinations that would be silently ignored or fail after the work."""
    if args.energy == "ginkgo" and args.beta is not None:
        parser.error("--beta applies to --energy dasgupta and hcc; the Ginkgo likelihood "
                     "has no temperature")
    if args.beta is None:
        args.beta = "auto"
    elif not np.isfinite(args.beta) or args.beta < 0:
        parser.error(f"--beta must be a finite number >= 0, got {args.beta}")
    if args.plot:
        folder = os.path.dirname(os.path.abspath(args.plot))
        target = args.plot if os.path.exists(args.plot) else folder
        if not os.path.isdir(folder) or not os.access(target, os.W_OK):
            parser.error(f"--plot {args.plot!r} cannot be written (check the folder exists "
                         "and is writable)")


def run(args):
    if args.csv is None:
        iris = load_iris12()
        data, names = iris.data, iris.sample_names
        source = "bundled iris subset (12 flowers, 3 species)"
    else:
        data, names = read_table(args.csv)
        source = args.csv
    if len(data) > MAX_EXACT_POINTS:
        raise ValueError(
            f"{source} has n_samples={len(data)} rows; the exact trellis handles at most "
            f"{MAX_EXACT_POINTS}; use SparseTrellisClustering"
        )
    if args.standardize and args.energy != "ginkgo":
        # Each column divided by a power of two first (exact, as the energies
        # rescale): values near 1e308 standardise without overflowing.
        data = np.ldexp(data, -np.array([unit_exponent(column) for column in data.T]))
        spread = data.std(axis=0)
        data = (data - data.mean(axis=0)) / np.where(spread > 0, spread, 1.0)
    model = ExactHierarchicalClustering(
        _ENERGIES[args.energy](args.beta), n_clusters=min(args.n_clusters, len(data))
    )
    start = time.perf_counter()
    model.fit(data)
    fitted = time.perf_counter() - start
    start = time.perf_counter()
    clusters = model.most_probable_clusters(args.top)
    outside = time.perf_counter() - start

    print(f"data: {source}: {len(data)} points, {data.shape[1]} features")
    print(f"energy: {model._energy()!r}")
    if hasattr(model, "beta_"):
        calibration = model.calibration_
        if calibration["method"] == "fixed":
            how = "given by --beta"
        elif calibration["method"] == "feature bootstrap":
            how = "beta='auto': calibrated by a bootstrap over the features"
        else:
            how = f"beta='auto' NOT calibrated ({calibration['reason']}): the loss as given"
        print(f"beta_ = {model.beta_:.4g} ({how})")
    print(f"trees: {model.n_trees_:,} with non-zero potential")
    print(f"MAP tree (Newick): {to_newick(model.linkage_matrix_, names)}")
    print(f"log Z = {model.log_partition_:.6f}   MAP log potential = "
          f"{model.map_log_potential_:.6f}   P(MAP tree) = "
          f"{np.exp(model.map_log_potential_ - model.log_partition_):.3g}")
    print(f"{model.n_clusters} clusters of the MAP tree: "
          + "  ".join("{" + ", ".join(names[i] for i in np.flatnonzero(model.labels_ == k)) + "}"
                      for k in range(model.n_clusters)))
    print(f"most probable clusters (posterior probability that the tree contains them, "
          f"at beta_):")
    for members, probability in clusters:
        print(f"  {probability:8.4f}  {{{', '.join(names[i] for i in members)}}}")
    print(f"time: exact trellis {fitted:.3f} s, all cluster marginals {outside:.3f} s")
    if args.plot:
        save_dendrogram(model, names, args.plot)
        print(f"dendrogram saved to {args.plot}")


def save_dendrogram(model, names, path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ValueError("--plot needs matplotlib: pip install matplotlib") from None
    from .plotting import plot_dendrogram

    figure, axes = plt.subplots(figsize=(8, 4))
    plot_dendrogram(model, labels=list(names), ax=axes, leaf_rotation=90)
    axes.set_ylabel("subtree energy (-log potential)")
    temperature = f", beta_ = {model.beta_:.3g}" if hasattr(model, "beta_") else ""
    axes.set_title(f"MAP tree and clade support P(cluster | X){temperature}")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    check_arguments(parser, args)
    try:
        run(args)
    except (ValueError, OSError) as error:
        parser.exit(2, f"error: {error}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

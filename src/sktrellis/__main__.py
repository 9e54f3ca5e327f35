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
import inspect
import io
import os
import sys
import time
import warnings

import numpy as np

from . import ExactHierarchicalClustering
from ._engine.resources import MAX_EXACT_POINTS
from ._validation import unit_exponent
from .datasets import load_iris12
from ._tree import Tree
from .energies import CorrelationClustering, Dasgupta, GinkgoLikelihood

# The API's default, read from its signature so that the two cannot differ.
_API_N_CLUSTERS = inspect.signature(ExactHierarchicalClustering).parameters[
    "n_clusters"].default

# The plot boxes the clades of at least this support (pvclust's pvrect at 95 %).
_HIGHLIGHT = 0.95

# Built exactly as the Python API's defaults; beta "auto" unless --beta.
_ENERGIES = {
    "dasgupta": lambda beta: Dasgupta(beta=beta),
    "hcc": lambda beta: CorrelationClustering(beta=beta),
    "ginkgo": lambda beta: GinkgoLikelihood(),
}


# Separators a table may use; the header row says which (the one it holds most).
_DELIMITERS = {",": "comma", ";": "semicolon", "\t": "tab", "|": "vertical bar"}


def read_table(path):
    """Features, row names and column roles of a CSV file with a header row.

    The separator is the one of comma, semicolon, tab and vertical bar that
    the header row holds most (comma if none). A column is numeric when most
    of its cells are numbers; then every cell must be a finite number, and
    an empty or non-numeric cell (``NA``, ``-``, ``1,000``) is an error
    naming its line and column: missing values are not guessed and no cell
    is dropped. A column of text names the rows (the first such column);
    further text columns are reported as not used.

    Returns
    -------
    data : ndarray of shape (n_rows, n_numeric_columns)
    names : list of str
    columns : dict
        "features" (names of the numeric columns), "names" (the column naming
        the rows, or None), "unused" (other text columns), "delimiter".
    """
    try:
        with open(path, newline="") as stream:
            text = stream.read()
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"cannot read {path!r}: {error}") from None
    first_line = text.split("\n", 1)[0]
    delimiter = max(_DELIMITERS, key=lambda d: (first_line.count(d), d == ","))
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    try:
        rows = [row for row in reader if row]
    except csv.Error as error:
        raise ValueError(
            f"{path!r} line {reader.line_num}: {error} (read with the "
            f"{_DELIMITERS[delimiter]} as separator; a cell of over "
            f"{csv.field_size_limit():,} characters is neither a number nor a name: "
            "check the file's separator and quoting)"
        ) from None
    if len(rows) < 2:
        raise ValueError(f"{path!r} has no data rows below its header row")
    header, body = rows[0], rows[1:]
    for line, row in enumerate(body, start=2):
        if len(row) != len(header):
            raise ValueError(
                f"{path!r} line {line}: {len(row)} fields, but the header has {len(header)} "
                f"(separator: {_DELIMITERS[delimiter]})"
            )

    def is_number(cell):
        try:
            float(cell)
            return True
        except ValueError:
            return False

    numeric, text_columns = [], []
    for column in range(len(header)):
        cells = [row[column].strip() for row in body]
        filled = [cell for cell in cells if cell]
        # A number written with a decimal comma or thousands separators counts
        # towards a column of numbers, so that the cell is reported, not the
        # column taken as names.
        numbers = sum(is_number(cell) or is_number(cell.replace(",", "."))
                      or is_number(cell.replace(",", "")) for cell in filled)
        if filled and 2 * numbers <= len(filled):
            text_columns.append(column)
            continue
        numeric.append(column)
        for line, cell in enumerate(cells, start=2):
            where = f"{path!r} line {line}, column {header[column]!r}"
            if not cell:
                raise ValueError(
                    f"{where}: missing value; fill it in or remove the row (sktrellis "
                    "does not impute)"
                )
            if not is_number(cell):
                raise ValueError(
                    f"{where}: {cell[:40]!r} is not a number, in a column of numbers "
                    "(a missing-value code, a thousands separator or a decimal comma?); "
                    "fix or remove the row (sktrellis does not impute)"
                )
            if not np.isfinite(float(cell)):
                raise ValueError(
                    f"{where}: {cell!r} is not a finite number (NaN, infinity, or beyond "
                    "float64's 1.8e308); fix or remove the row"
                )
    if not numeric:
        raise ValueError(
            f"{path!r} has no numeric column (read with the {_DELIMITERS[delimiter]} as "
            f"separator, the header has {len(header)} column(s): {header[:5]})"
        )
    names = ([row[text_columns[0]] for row in body] if text_columns
             else [str(i) for i in range(len(body))])
    data = np.array([[float(row[c]) for c in numeric] for row in body])
    columns = {
        "features": [header[c] for c in numeric],
        "names": header[text_columns[0]] if text_columns else None,
        "unused": [header[c] for c in text_columns[1:]],
        "delimiter": _DELIMITERS[delimiter],
    }
    return data, names, columns


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
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        description="Exact hierarchical clustering (cluster trellis) of a small dataset: "
        "the MAP tree, log Z, and the most probable clusters.",
    )
    parser.add_argument("csv", nargs="?", help="CSV file with a header row "
                        "(default: the bundled 12-flower iris subset)")
    parser.add_argument("--energy", choices=sorted(_ENERGIES), default="dasgupta",
                        help="energy model")
    parser.add_argument("--beta", type=float, default=None,
                        help="inverse temperature of dasgupta and hcc (None: calibrated "
                        "from the data, beta='auto', as in the Python API)")
    parser.add_argument("--standardize", action="store_true",
                        help="scale every feature to zero mean and unit variance first")
    parser.add_argument("--n-clusters", type=_positive_int,
                        default=_API_N_CLUSTERS,
                        help="clusters of the flat cut of the MAP tree (the Python API's "
                        "n_clusters)")
    parser.add_argument("--top", type=_positive_int, default=8,
                        help="how many probable clusters to list")
    parser.add_argument("--plot", metavar="PNG", help="save a dendrogram of the MAP tree, "
                        "heights in mean Euclidean distance, nodes with their support, "
                        f"boxes around the clades of support >= {_HIGHLIGHT}")
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
        columns = {"features": list(iris.feature_names), "names": None, "unused": [],
                   "delimiter": "comma"}
    else:
        data, names, columns = read_table(args.csv)
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
    clusters = informative_clusters(model, args.top)
    fitted = time.perf_counter() - start

    print(f"data: {source}: {len(data)} points, {data.shape[1]} features")
    print(f"features: {', '.join(columns['features'])}")
    if args.csv is not None:
        print(f"row names: {'column ' + repr(columns['names']) if columns['names'] else 'none (rows numbered from 0)'}"
              f"; separator: {columns['delimiter']}")
    if columns["unused"]:
        print(f"not used (text columns after the one naming the rows): "
              f"{', '.join(repr(name) for name in columns['unused'])}")
    print(f"energy: {model._energy()!r}")
    if hasattr(model, "beta_"):
        calibration = model.calibration_
        if calibration["method"] == "fixed":
            how = "given by --beta"
        elif calibration["method"] == "feature bootstrap":
            how = "beta='auto': calibrated by a bootstrap over the features"
        elif calibration["method"] == "tested-null":
            how = (f"beta='auto': few features, test then temper (p = "
                   f"{calibration['p_value']:.2g}, {calibration['branch']})")
        else:
            how = f"beta='auto' NOT calibrated ({calibration['reason']}): the loss as given"
        print(f"beta_ = {model.beta_:.4g} ({how})")
    print(f"trees: {model.n_trees_:,} with non-zero potential")
    tree = Tree(model.linkage_matrix_, names)
    if args.energy == "ginkgo":
        lengths = "energy"
    else:
        tree, lengths = tree.with_heights(data), "mean Euclidean distance"
    print(f"MAP tree (Newick; branch lengths: {lengths}; inner labels: clade support): "
          f"{tree.to_newick(support=model.clade_support())}")
    print(f"log Z = {model.log_partition_:.6f}   MAP log potential = "
          f"{model.map_log_potential_:.6f}   P(MAP tree) = "
          f"{np.exp(model.map_log_potential_ - model.log_partition_):.3g}")
    print(f"{model.n_clusters} clusters (the partition agreeing best with the posterior's): "
          + "  ".join("{" + ", ".join(names[i] for i in np.flatnonzero(model.labels_ == k)) + "}"
                      for k in range(model.n_clusters)))
    print("most probable clusters (posterior probability that the tree contains them, "
          "at beta_; a complement on the same line: in one tree the two are the root's children):")
    for members, probability, complement in clusters:
        rest = "" if complement is None else f"   and its complement: {complement:.4f}"
        print(f"  {probability:8.4f}  {{{', '.join(names[i] for i in members)}}}{rest}")
    print(f"time: exact trellis with all cluster marginals {fitted:.3f} s")
    if args.plot:
        save_dendrogram(model, data, names, args.plot, args.energy)
        print(f"dendrogram saved to {args.plot}")


def informative_clusters(model, n_top):
    """The n_top most probable clusters, a complementary pair on one line.

    Below the root's split a cluster and its complement are one event (the
    root's two children), so the complement adds no line of its own: it is
    listed with the first of the two, with its own probability.

    Returns
    -------
    list of (members, probability, complement probability or None)
    """
    everything = (1 << model.n_leaves_) - 1
    shown, where = [], {}
    for members, probability in model.most_probable_clusters(2 * n_top):
        mask = sum(1 << int(i) for i in members)
        if (everything ^ mask) in where:
            row = where[everything ^ mask]
            shown[row] = shown[row][:2] + (probability,)
            continue
        where[mask] = len(shown)
        shown.append((members, probability, None))
    return shown[:n_top]


def save_dendrogram(model, data, names, path, energy):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ValueError("--plot needs matplotlib: pip install matplotlib") from None
    from .plotting import plot_dendrogram

    # Margins fixed before drawing: the plot leaves out support labels that
    # would overlap, which it can only judge at the final size.
    figure, axes = plt.subplots(figsize=(8, 4.5))
    figure.subplots_adjust(left=0.1, right=0.98, top=0.9, bottom=0.3)
    if energy == "ginkgo":
        # Four-momenta have no Euclidean geometry worth drawing.
        tree, unit = None, "subtree energy (-log potential)"
    else:
        tree = model.tree_.with_heights(data)
        unit = "mean Euclidean distance between the children's points"
    plot_dendrogram(model, tree=tree, labels=list(names), ax=axes, leaf_rotation=90,
                    highlight=_HIGHLIGHT)
    axes.set_ylabel(unit, fontsize="small")
    temperature = f", beta_ = {model.beta_:.3g}" if hasattr(model, "beta_") else ""
    axes.set_title(f"MAP tree and clade support P(cluster | X){temperature}; boxed: "
                   f"support >= {_HIGHLIGHT}", fontsize="medium")
    figure.savefig(path, dpi=120)
    plt.close(figure)


def show_warning(message, category, filename, lineno, file=None, line=None):
    """Print a warning as the command line's own message, ``warning: ...`` on stderr.

    Python's default form names the line that caused it, which for
    ``python -m sktrellis`` is inside runpy (``<frozen runpy>:88:
    UserWarning: ...``), a location that tells the user nothing.

    Parameters
    ----------
    message : Warning or str
    category : type
    filename : str
    lineno : int
    file : file-like, default=None
        Where to write; None means ``sys.stderr``.
    line : str, default=None

    Examples
    --------
    >>> import io
    >>> out = io.StringIO()
    >>> show_warning(UserWarning("few features"), UserWarning, "x.py", 1, file=out)
    >>> out.getvalue()
    'warning: few features\n'
    """
    (sys.stderr if file is None else file).write(f"warning: {message}\n")


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
    warnings.showwarning = show_warning
    sys.exit(main())

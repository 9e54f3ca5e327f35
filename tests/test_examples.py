"""Every gallery example runs to the end (the documentation build runs them too)."""
import os
import runpy
import sys
from pathlib import Path

import numpy as np
import pytest

import sktrellis

# Examples sit in one folder per gallery section.
EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*/plot_*.py"))

# What each example left in its namespace, for the tests of what its text says.
_NAMESPACES = {}


def _run_example(name, tmp_path, monkeypatch):
    """Run an example in this interpreter, as the documentation build does, and keep its namespace.

    One interpreter for all: a fresh one per example cost about 1.5 CPU
    seconds of start-up and imports each. Figures go to the Agg backend and
    are closed; the working directory, ``sys.path`` and ``PYTHONPATH`` are
    the example's own for its run and restored after.
    """
    if name in _NAMESPACES:
        return _NAMESPACES[name]
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    plt.switch_backend("Agg")
    monkeypatch.setattr(plt, "show", lambda *args, **kwargs: None)
    # The Cython example's compiler (a subprocess) finds
    # sktrellis/energies/__init__.pxd on the path; an editable install
    # serves the package by an import hook, which Cython does not consult,
    # so its directory is put there.
    package_root = str(Path(sktrellis.__file__).resolve().parents[1])
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        filter(None, [package_root, os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(sys, "argv", [name])
    script = next(str(path) for path in EXAMPLES if path.name == name)
    try:
        _NAMESPACES[name] = runpy.run_path(script, run_name="__main__")
    finally:
        plt.close("all")
    return _NAMESPACES[name]


@pytest.mark.slow
@pytest.mark.parametrize("script", EXAMPLES, ids=[path.stem for path in EXAMPLES])
def test_example_runs(script, tmp_path, monkeypatch):
    _run_example(script.name, tmp_path, monkeypatch)


def test_ward_like_energy_recovers_the_blobs(tmp_path, monkeypatch):
    """What the text of plot_custom_energy.py says is what the example computes."""
    from sklearn.metrics import adjusted_rand_score

    example = _run_example("plot_custom_energy.py", tmp_path, monkeypatch)
    blob, model = example["blob"], example["model"]
    # Both trees cut into the three blobs, each a cluster with high probability.
    assert adjusted_rand_score(blob, model.labels_) == 1.0
    assert adjusted_rand_score(blob, example["greedy_labels"]) == 1.0
    assert min(example["blob_probability"]) > 0.9
    # The MAP is optimal: never below the greedy Ward tree under the same cost.
    assert model.map_log_potential_ >= example["greedy_log_potential"] - 1e-9


@pytest.mark.slow
def test_past_25_points_numbers_mean_what_the_text_says(tmp_path, monkeypatch):
    """The bounds plot_past_25_points.py explains hold on its data."""
    example = _run_example("plot_past_25_points.py", tmp_path, monkeypatch)
    sparse_flat, certified = example["sparse_flat"], example["certified"]
    sparse_tree, search = example["sparse_tree"], example["search"]
    lower, upper = example["lower"], example["upper"]
    # A spanned MAP is never above a certified upper bound over all.
    assert sparse_flat.map_log_potential_ <= certified.log_potential_upper_bound_ + 1e-9
    assert sparse_tree.map_log_potential_ <= search.log_potential_upper_bound_ + 1e-9
    assert certified.log_potential_upper_bound_ == pytest.approx(
        certified.map_log_potential_ + certified.optimality_gap_)
    # The spanned log Z is a lower bound of the full one, inside its bracket's top.
    assert lower <= upper and sparse_tree.log_partition_ <= upper + 1e-9
    assert sparse_flat.log_partition_ >= sparse_flat.map_log_potential_
    assert 0.0 < np.exp(sparse_flat.log_probability(sparse_flat.labels_)) <= 1.0

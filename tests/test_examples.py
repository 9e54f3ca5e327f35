"""Every gallery example runs to the end (the documentation build runs them too)."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import sktrellis

# Examples sit in one folder per gallery section.
EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*/plot_*.py"))


@pytest.mark.slow
@pytest.mark.parametrize("script", EXAMPLES, ids=[path.stem for path in EXAMPLES])
def test_example_runs(script, tmp_path):
    pytest.importorskip("matplotlib")
    # The Cython example's compiler finds sktrellis/energies/__init__.pxd on
    # the path; an editable install serves the package by an import hook,
    # which Cython does not consult, so its directory is put there.
    package_root = str(Path(sktrellis.__file__).resolve().parents[1])
    path = os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, MPLBACKEND="Agg", PYTHONPATH=path)
    result = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]


def test_ward_like_energy_recovers_the_blobs(monkeypatch):
    """What the text of plot_custom_energy.py says is what the example computes."""
    import runpy

    pytest.importorskip("matplotlib")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    import matplotlib.pyplot as plt

    monkeypatch.setattr(plt, "show", lambda: None)
    from sklearn.metrics import adjusted_rand_score

    example = runpy.run_path(next(str(p) for p in EXAMPLES if p.name == "plot_custom_energy.py"))
    plt.close("all")
    blob, model = example["blob"], example["model"]
    # Both trees cut into the three blobs, each a cluster with high probability.
    assert adjusted_rand_score(blob, model.labels_) == 1.0
    assert adjusted_rand_score(blob, example["greedy_labels"]) == 1.0
    assert min(example["blob_probability"]) > 0.9
    # The MAP is optimal: never below the greedy Ward tree under the same cost.
    assert model.map_log_potential_ >= example["greedy_log_potential"] - 1e-9


@pytest.mark.slow
def test_past_25_points_numbers_mean_what_the_text_says(monkeypatch):
    """The bounds plot_past_25_points.py explains hold on its data."""
    import runpy

    pytest.importorskip("matplotlib")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    import matplotlib.pyplot as plt

    monkeypatch.setattr(plt, "show", lambda: None)
    example = runpy.run_path(next(str(p) for p in EXAMPLES if p.name == "plot_past_25_points.py"))
    plt.close("all")
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

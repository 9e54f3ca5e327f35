"""
==========================================================
Many small datasets at once: ``fit_many``
==========================================================

Jets, patients, experiments: many small, independent datasets, each
exact. :func:`~sktrellis.fit_many` fits a clone of one estimator to each,
with joblib (local processes, or a Dask cluster inside
``joblib.parallel_backend("dask")``), and returns only what ``result``
asks for, computed where the fit ran, so the 2**N-entry tables never
travel.

Here 60 datasets of 10 points: two groups of five whose centres lie a
varying distance apart. For each, the exact probability that the first
group is a cluster of the tree: how much separation the posterior needs
before it is sure.
"""

import matplotlib.pyplot as plt
import numpy as np

from sktrellis import ExactHierarchicalClustering, fit_many
from sktrellis.energies import Dasgupta

rng = np.random.default_rng(0)
distances = np.linspace(0.0, 6.0, 60)
datasets = [
    np.vstack([rng.normal(size=(5, 2)), rng.normal(size=(5, 2)) + [d, 0.0]]) for d in distances
]


def first_group_probability(model):
    """Computed on the worker: a float travels back, not the fitted tables."""
    return model.cluster_probability(range(5))


template = ExactHierarchicalClustering(Dasgupta(beta=1.0), n_jobs=1, verbose=0)
probabilities = fit_many(template, datasets, result=first_group_probability, n_jobs=2)
print(f"{len(probabilities)} fits, {probabilities.execution}, "
      f"batches of {probabilities.batch_size}")

# %%
fig, ax = plt.subplots(figsize=(5.5, 3.5))
ax.plot(distances, probabilities, "o", ms=4)
ax.set_xlabel("distance between the two groups' centres")
ax.set_ylabel("P(first group is a cluster | X)")
ax.set_ylim(-0.03, 1.03)
plt.tight_layout()
plt.show()

"""
==============================================================
The temperature from the data: ``beta="auto"``
==============================================================

An energy scores trees; how sharply the posterior prefers the better ones
is its inverse temperature ``beta``. Fixed at 1, the probabilities depend
on the units of the data. The energies' default ``beta="auto"`` calibrates
it by a bootstrap over the feature columns (stored as ``beta_``): planted
groups get high support, structureless data none.

Here 14 samples of 3000 "genes" with three planted subtypes
(:func:`~sktrellis.datasets.make_planted_subtypes`), and the same data
without the subtypes' shifts (pure noise): the support of each subtype,
and the most probable cluster of 3 to 13 samples on the noise.
"""

import matplotlib.pyplot as plt
import numpy as np

from sktrellis import ExactHierarchicalClustering
from sktrellis.datasets import make_planted_subtypes
from sktrellis.energies import Dasgupta

X, subtype = make_planted_subtypes(n_samples=14, random_state=0)
noise, _ = make_planted_subtypes(n_samples=14, shift=0.0, random_state=0)


def largest_cluster_probability(model):
    """The largest posterior probability of a cluster of 3..N-1 points."""
    return model.most_probable_clusters(1, min_size=3)[0][1]


rows = {}
for name, energy in [("beta='auto'", Dasgupta()), ("beta=1", Dasgupta(beta=1.0))]:
    planted = ExactHierarchicalClustering(energy, n_clusters=3, verbose=0).fit(X)
    null = ExactHierarchicalClustering(energy, n_clusters=3, verbose=0).fit(noise)
    supports = [planted.cluster_probability(np.flatnonzero(subtype == k)) for k in range(3)]
    rows[name] = supports + [largest_cluster_probability(null)]
    print(f"{name:12s} beta_ = {planted.beta_:7.3g} (noise: {null.beta_:.3g}); "
          f"subtype supports {np.round(supports, 3)}; "
          f"largest noise cluster {rows[name][-1]:.2f}")

# %%
# Calibrated, the subtypes are near certain and no cluster of the noise is
# likely; at beta = 1 both are washed out together.
fig, ax = plt.subplots(figsize=(6, 3.5))
labels = ["subtype 0", "subtype 1", "subtype 2", "best noise cluster"]
width = 0.38
for shift, (name, values) in zip((-width / 2, width / 2), rows.items()):
    ax.bar(np.arange(4) + shift, values, width, label=name)
ax.set_xticks(np.arange(4), labels)
ax.set_ylabel("posterior probability")
ax.set_ylim(0, 1.05)
ax.legend()
plt.tight_layout()
plt.show()

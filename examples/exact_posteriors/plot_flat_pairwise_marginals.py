"""
======================================================
Pairwise marginals are not pairwise energies
======================================================

A correlation-clustering energy scores a partition by the signed
similarities of the pairs it keeps together. It is tempting to read the
pairwise energy of two samples as "how likely they are to be clustered
together". The exact pairwise marginal -- the probability, over *all*
Bell(N) partitions, that the two samples share a cluster -- says otherwise:
two samples that repel each other can still almost surely end up together,
because both are strongly attracted to the same group of other samples.

This reproduces the analysis of the flat cluster trellis paper (Greenberg et
al., NeurIPS 2018, section 5.3, figures 2, 4 and 5) on 15 wines (5 of each
cultivar) from scikit-learn's wine data: Bell(15) = 1.4e9 partitions, summed
exactly by :class:`~sktrellis.ExactFlatClustering` in well under a second.
"""

# %%
# Data and energy
# ---------------
# As in the paper, the similarity of two samples is the exponentiated
# negative Euclidean distance minus its mean over all pairs, so that about
# half the pairs attract and half repel; ``beta`` sharpens the distribution.
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_wine
from sklearn.preprocessing import StandardScaler

from sktrellis import ExactFlatClustering
from sktrellis.energies import CorrelationClustering

wine = load_wine()
rows = np.r_[0:5, 59:64, 130:135]
X = StandardScaler().fit_transform(wine.data[rows])
cultivar = wine.target[rows]
# Sample names: cultivar letter and position, e.g. "B7".
names = [f"{'ABC'[c]}{k}" for k, c in enumerate(cultivar)]

energy = CorrelationClustering(affinity="exponential", beta=30.0)
model = ExactFlatClustering(energy).fit(X)
pair_energy = energy.beta * energy.weights(X)   # log potential of keeping i and j together
marginal = model.pairwise_probability_

print("MAP partition:", model.labels_)
print("cultivars:    ", cultivar)
print("P(number of clusters):",
      {k: round(float(p), 3) for k, p in enumerate(model.n_clusters_probability_) if p > 1e-3})

# %%
# Pairwise energies against pairwise marginals
# --------------------------------------------
# Each dot is a pair of wines. Pairs in the upper left repel each other
# (negative energy) and yet are clustered together with high probability.
upper = np.triu_indices(len(X), k=1)
energies = pair_energy[upper]
log_marginals = np.log10(np.maximum(marginal[upper], 1e-300))
surprising = (energies < 0) & (marginal[upper] > 0.9)

fig, ax = plt.subplots(figsize=(6, 4.5))
ax.scatter(energies[~surprising], log_marginals[~surprising], s=14, color="0.5",
           label="pairs")
ax.scatter(energies[surprising], log_marginals[surprising], s=30, color="C3",
           label="repelling, yet P(together) > 0.9")
# The most repelling of these pairs, and the sample that draws both most.
i, j = (index[surprising][np.argmin(energies[surprising])] for index in upper)
others = [k for k in range(len(X)) if k not in (i, j)]
bridge = max(others, key=lambda k: min(pair_energy[i, k], pair_energy[j, k]))
ax.annotate(f"{names[i]} & {names[j]}", (pair_energy[i, j], np.log10(marginal[i, j])),
            xytext=(10, -25), textcoords="offset points", arrowprops={"arrowstyle": "->"})
ax.set_xlabel("pairwise log energy  beta * w_ij")
ax.set_ylabel("log10 P(i and j in the same cluster | X)")
ax.set_title("Pairwise energies vs exact pairwise marginals")
ax.legend(loc="lower right")
fig.tight_layout()

print(f"{names[i]} & {names[j]}: pairwise energy {pair_energy[i, j]:.2f}, "
      f"P(same cluster) = {marginal[i, j]:.4f}")
print(f"both are drawn to {names[bridge]}: pairwise energies {pair_energy[i, bridge]:.2f} "
      f"and {pair_energy[j, bridge]:.2f}, P(same cluster) = {marginal[i, bridge]:.4f} "
      f"and {marginal[j, bridge]:.4f}")

# %%
# The two matrices side by side
# -----------------------------
# Energies are local; marginals integrate over every partition.
fig, axes = plt.subplots(1, 2, figsize=(10, 4.5))
limit = np.abs(pair_energy).max()
shown = [
    (pair_energy, "pairwise log energy", dict(cmap="RdBu_r", vmin=-limit, vmax=limit)),
    (marginal, "P(same cluster | X)", dict(cmap="viridis", vmin=0, vmax=1)),
]
for ax, (matrix, title, style) in zip(axes, shown):
    image = ax.imshow(matrix, **style)
    ax.set_xticks(range(len(X)), names, rotation=90, fontsize=7)
    ax.set_yticks(range(len(X)), names, fontsize=7)
    for a, b in [(i, j), (j, i)]:
        ax.add_patch(plt.Rectangle((b - 0.5, a - 0.5), 1, 1, fill=False, color="C3", lw=2))
    ax.set_title(title)
    fig.colorbar(image, ax=ax, shrink=0.8)
fig.tight_layout()
plt.show()

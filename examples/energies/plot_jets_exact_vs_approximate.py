"""
====================================================
Toy jets: exact MAP, greedy, beam search, and truth
====================================================

A jet is the spray of particles left by a parton shower; its branching
history is a binary tree that detectors never see. With the Ginkgo toy
shower's likelihood (:class:`~sktrellis.energies.GinkgoLikelihood`) the exact
trellis finds the most likely history and the whole posterior over
histories. Here we compare it with greedy and beam-search clustering and
with the true tree on simulated jets, then look at the posterior of one jet
through exact samples (as in Fig. 6 of Greenberg et al., AISTATS 2021).
"""

import matplotlib.pyplot as plt
import numpy as np

from sktrellis import ExactHierarchicalClustering
from sktrellis.baselines import BeamSearchHierarchicalClustering, GreedyHierarchicalClustering
from sktrellis.datasets import make_jets
from sktrellis.energies import GinkgoLikelihood

energy = GinkgoLikelihood()
jets = make_jets(30, n_leaves=8, random_state=0)

gaps = {"greedy": [], "beam search (width 28)": [], "true tree": []}
for jet in jets:
    exact = ExactHierarchicalClustering(energy).fit(jet.momenta)
    greedy = GreedyHierarchicalClustering(energy).fit(jet.momenta)
    beam = BeamSearchHierarchicalClustering(energy, beam_width=28).fit(jet.momenta)
    gaps["greedy"].append(exact.map_log_potential_ - greedy.map_log_potential_)
    gaps["beam search (width 28)"].append(exact.map_log_potential_ - beam.map_log_potential_)
    gaps["true tree"].append(exact.map_log_potential_ - jet.log_likelihood)

for name, values in gaps.items():
    print(f"{name:>24}: mean log-likelihood below the exact MAP {np.mean(values):.3f}")

# %%
# The posterior over trees of one jet
# -----------------------------------
# 20,000 exact samples from P(tree | jet): each distinct tree's sampled
# frequency against its exact probability ``exp(log_probability(tree))``.
jet = make_jets(1, n_leaves=5, random_state=3)[0]
model = ExactHierarchicalClustering(energy, random_state=0).fit(jet.momenta)
samples = model.sample(20_000)
keys = [tuple(map(tuple, z[:, :2].astype(int))) for z in samples]
distinct, first, counts = np.unique(
    np.array(keys).reshape(len(keys), -1), axis=0, return_index=True, return_counts=True
)
exact = np.exp([model.log_probability(samples[i]) for i in first])

fig, ax = plt.subplots(figsize=(5, 4.5))
ax.loglog(exact, counts / len(samples), "o", color="k", ms=4, label="sampled trees")
line = np.array([exact.min(), exact.max()])
ax.loglog(line, line, color="C2", label="frequency = probability")
ax.set_xlabel("exact posterior probability of the tree")
ax.set_ylabel("frequency in 20,000 samples")
ax.set_title(f"{len(distinct)} of {model.n_trees_} possible trees sampled")
ax.legend()
fig.tight_layout()
plt.show()

"""
======================================================================
Bayesian hierarchical clustering: its bound against the exact evidence
======================================================================

Heller & Ghahramani's Bayesian hierarchical clustering (BHC) builds a tree
greedily and reports a lower bound on the marginal likelihood of a
Dirichlet-process mixture (DPM). For a few dozen points the flat trellis
computes that marginal likelihood exactly, summing over all Bell(N)
partitions, and the hierarchical trellis finds the tree with the tightest
bound (``algorithm="exact"``). This example shows the three side by side on
subsets of the iris data, under one model: a
:class:`~sktrellis.energies.DirichletProcessMixture` with full covariances,
given to BHC as its energy (``covariance_type=None`` keeps the energy's type
instead of choosing one) and to the flat trellis as the fitted ``energy_``.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_iris
from sklearn.preprocessing import StandardScaler

from sktrellis import ExactFlatClustering
from sktrellis.baselines import BayesianHierarchicalClustering
from sktrellis.energies import DirichletProcessMixture

X_all = StandardScaler().fit_transform(load_iris().data)
rng = np.random.default_rng(0)
sizes = [8, 10, 12, 14]
rows = []
for n in sizes:
    X = X_all[rng.choice(len(X_all), n, replace=False)]
    dpm = DirichletProcessMixture(covariance_type="full")
    greedy = BayesianHierarchicalClustering(dpm, covariance_type=None, algorithm="greedy").fit(X)
    best = BayesianHierarchicalClustering(dpm, covariance_type=None, algorithm="exact").fit(X)
    exact = ExactFlatClustering(greedy.energy_).fit(X)
    rows.append((greedy.log_evidence_lower_bound_, best.log_evidence_lower_bound_,
                 exact.log_evidence_))
    print(f"N={n:2d}: greedy BHC bound {rows[-1][0]:8.3f}, best-tree bound "
          f"{rows[-1][1]:8.3f}, exact log p(X) {rows[-1][2]:8.3f}")

# %%
rows = np.array(rows)
fig, ax = plt.subplots(figsize=(6, 3.5))
for column, label in enumerate(["greedy BHC tree", "best tree (trellis)", "exact evidence"]):
    ax.plot(sizes, rows[:, column] - rows[:, 2], "o-", label=label)
ax.set_xlabel("number of points")
ax.set_ylabel("log evidence minus exact")
ax.set_title("DPM lower bounds against the exact marginal likelihood")
ax.legend()
fig.tight_layout()
plt.show()

# %%
# Predicting new points and learning the hyperparameters
# -------------------------------------------------------
# BHC defines a predictive distribution: a new point's density is a sum over
# the tree's nodes of their posterior predictive, weighted by the probability
# that each node is a cluster (``score_samples``), and ``predict_proba``
# splits it over the clusters of the cut tree. ``hyperparameters="learn"``
# maximises the DPM evidence lower bound over the concentration and
# the scale of the component prior, alternating tree and hyperparameters.
train = rng.permutation(len(X_all))[:60]
test = np.setdiff1d(np.arange(len(X_all)), train)
fixed = BayesianHierarchicalClustering().fit(X_all[train])
learned = BayesianHierarchicalClustering(hyperparameters="learn").fit(X_all[train])
for name, model in [("default priors", fixed), ("learned", learned)]:
    print(f"{name:15s} alpha={model.alpha_:6.2f} prior scale={model.prior_scale_:.3f} "
          f"log p(D|T)={model.log_marginal_likelihood_:8.2f} clusters={model.n_clusters_} "
          f"held-out log density={model.score_samples(X_all[test]).mean():.3f}")
proba = learned.predict_proba(X_all[test])
print("held-out points assigned with probability > 0.9:", f"{np.mean(proba.max(axis=1) > 0.9):.0%}")

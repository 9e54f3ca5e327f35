"""
==========================================================
Choosing an energy parameter with dendrogram purity
==========================================================

The exact estimators are transductive: they cluster the points they are
fitted on. A grid search therefore fits and scores each candidate on the
same points, with a single "split" ``cv=[(idx, idx)]``. The tree scorer reads
the fitted MAP tree (also at the end of a pipeline) and compares it with
known labels; the posterior scorer averages the purity over *all* trees,
weighted by their exact posterior probability.
"""

import matplotlib.pyplot as plt
import numpy as np
from scipy.cluster.hierarchy import dendrogram
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sktrellis import ExactHierarchicalClustering
from sktrellis.datasets import load_iris12
from sktrellis.energies import Dasgupta
from sktrellis.metrics import (
    dendrogram_purity,
    expected_dendrogram_purity,
    make_posterior_scorer,
    make_tree_scorer,
)

iris = load_iris12()
idx = np.arange(len(iris.data))
gammas = [0.03, 0.1, 0.3, 1.0, 3.0]
search = GridSearchCV(
    make_pipeline(StandardScaler(), ExactHierarchicalClustering(Dasgupta(), n_clusters=3)),
    {"exacthierarchicalclustering__energy__gamma": gammas},
    scoring={
        "MAP tree purity": make_tree_scorer(dendrogram_purity),
        "expected purity": make_posterior_scorer(expected_dendrogram_purity),
    },
    refit="expected purity",
    cv=[(idx, idx)],
).fit(iris.data, iris.target)

for name in ("MAP tree purity", "expected purity"):
    print(name, np.round(search.cv_results_[f"mean_test_{name}"], 3))
print("best:", search.best_params_)

# %%
fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
for name in ("MAP tree purity", "expected purity"):
    left.semilogx(gammas, search.cv_results_[f"mean_test_{name}"], "o-", label=name)
left.set_xlabel("RBF gamma")
left.set_ylabel("dendrogram purity")
left.legend()
best = search.best_estimator_[-1]
dendrogram(best.linkage_matrix_, labels=iris.sample_names, ax=right, leaf_rotation=90)
right.set_title("MAP tree at the best gamma")
fig.tight_layout()
plt.show()

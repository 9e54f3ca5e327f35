"""Approximate baselines: agglomerative searches under any hierarchical energy,
Bayesian hierarchical clustering, transitive propagation and Perturb-and-MAP."""
from ._beam import BeamSearchHierarchicalClustering
from ._bhc.bhc import BayesianHierarchicalClustering
from ._greedy import GreedyHierarchicalClustering
from ._perturb_and_map import PerturbAndMAPClustering
from ._transitive_propagation import TransitivePropagation

__all__ = [
    "BayesianHierarchicalClustering",
    "BeamSearchHierarchicalClustering",
    "GreedyHierarchicalClustering",
    "PerturbAndMAPClustering",
    "TransitivePropagation",
]

"""Approximate baselines: agglomerative searches under any hierarchical energy."""
from ._beam import BeamSearchHierarchicalClustering
from ._bhc import BayesianHierarchicalClustering
from ._greedy import GreedyHierarchicalClustering
from ._transitive_propagation import TransitivePropagation

__all__ = [
    "BayesianHierarchicalClustering",
    "BeamSearchHierarchicalClustering",
    "GreedyHierarchicalClustering",
    "TransitivePropagation",
]

"""Energy models: the log potential of a split (trees) or a cluster (partitions).

Energies are small estimator-like objects: their constructor arguments are
parameters (``get_params``/``set_params``), so an estimator's
``energy__beta`` can be grid-searched.
"""
from ._base import FlatEnergy, HierarchicalEnergy
from ._correlation import CorrelationClustering
from ._custom import ClusterEnergy, SplitEnergy
from ._dasgupta import Dasgupta
from ._dpm import DirichletProcessMixture
from ._ginkgo import GinkgoLikelihood

__all__ = [
    "ClusterEnergy",
    "CorrelationClustering",
    "Dasgupta",
    "DirichletProcessMixture",
    "FlatEnergy",
    "GinkgoLikelihood",
    "HierarchicalEnergy",
    "SplitEnergy",
]

"""Energy models: the log potential of a split (trees) or a cluster (partitions).

Energies are small estimator-like objects: their constructor arguments are
parameters (``get_params``/``set_params``), so an estimator's
``energy__beta`` can be grid-searched.
"""
from ._base import HierarchicalEnergy
from ._correlation import CorrelationClustering
from ._custom import SplitEnergy
from ._dasgupta import Dasgupta
from ._ginkgo import GinkgoLikelihood

__all__ = [
    "CorrelationClustering",
    "Dasgupta",
    "GinkgoLikelihood",
    "HierarchicalEnergy",
    "SplitEnergy",
]

"""Energy models: the log potential of a split (trees) or a cluster (partitions).

Energies are small estimator-like objects: their constructor arguments are
parameters (``get_params``/``set_params``), so an estimator's
``energy__beta`` can be grid-searched.

A new energy needs no kernel code: subclass :class:`HierarchicalEnergy`
and return a :class:`SplitPotential` from ``split_potential(X)`` (the
separable form, and any O(1) potential written as a C function against the
public Cython contract ``sktrellis/energies/__init__.pxd``, run at the
speed of the built-in energies), or subclass
:class:`FlatEnergy` and return a table of cluster log potentials; the
subset tables :func:`subset_sums`, :func:`subset_pair_sums` and
:func:`subset_sizes` build either in O(2**N) vectorised steps.
"""
from .._engine.potential._split_potential import SplitPotential, register_split_function
from ._base import FlatEnergy, HierarchicalEnergy
from ._correlation import CorrelationClustering
from ._custom import ClusterEnergy, SplitEnergy
from ._dasgupta import Dasgupta
from ._dpm import DirichletProcessMixture
from ._ginkgo import GinkgoLikelihood
from .._engine.tables import subset_pair_sums, subset_sizes, subset_sums

__all__ = [
    "ClusterEnergy",
    "CorrelationClustering",
    "Dasgupta",
    "DirichletProcessMixture",
    "FlatEnergy",
    "GinkgoLikelihood",
    "HierarchicalEnergy",
    "SplitEnergy",
    "SplitPotential",
    "register_split_function",
    "subset_pair_sums",
    "subset_sizes",
    "subset_sums",
]

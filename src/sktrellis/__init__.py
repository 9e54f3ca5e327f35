"""sktrellis: exact inference over clusterings with the cluster trellis."""
from ._engine.posterior import TreePosterior
from ._many import fit_many
from ._model_file import PICKLE_GLOBALS, load
from ._best_first import BestFirstHierarchicalClustering
from ._certified import CertifiedFlatClustering
from ._flat import ExactFlatClustering
from ._hierarchical import ExactHierarchicalClustering
from ._sparse import SparseTrellisClustering
from ._sparse_flat import SparseFlatClustering
from ._tree import Tree

__version__ = "0.1.0"

__all__ = [
    "BestFirstHierarchicalClustering",
    "CertifiedFlatClustering",
    "ExactFlatClustering",
    "ExactHierarchicalClustering",
    "SparseFlatClustering",
    "SparseTrellisClustering",
    "Tree",
    "TreePosterior",
    "fit_many",
    "load",
    "PICKLE_GLOBALS",
    "__version__",
]

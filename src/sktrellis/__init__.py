"""sktrellis: exact inference over clusterings with the cluster trellis."""
from ._engine.posterior import TreePosterior
from ._many import fit_many
from ._model_file import PICKLE_GLOBALS, load
from .best_first import BestFirstHierarchicalClustering
from .certified import CertifiedFlatClustering
from .flat import ExactFlatClustering
from .hierarchical import ExactHierarchicalClustering
from .sparse import SparseTrellisClustering
from .sparse_flat import SparseFlatClustering
from .tree import Tree

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

"""sktrellis: exact inference over clusterings with the cluster trellis."""
from ._many import fit_many
from .hierarchical import ExactHierarchicalClustering

__version__ = "0.1.0"

__all__ = ["ExactHierarchicalClustering", "fit_many", "__version__"]

"""sktrellis: exact inference over clusterings with the cluster trellis."""
from .hierarchical import ExactHierarchicalClustering

__version__ = "0.1.0"

__all__ = ["ExactHierarchicalClustering", "__version__"]

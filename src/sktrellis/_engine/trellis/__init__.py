"""The exact trellises: hierarchical and flat DPs over all 2^N subsets.

``HierarchicalTrellis`` and ``FlatTrellis`` run the inside, outside and
sampling passes level by level (``levels.py``) over the Cython kernels
(``_hierarchical.pyx``, ``_flat.pyx``); ``best_tree`` finds the tree of
largest summed node weight (maximum clade credibility, exact BHC). A fitted
``HierarchicalTrellis`` implements :class:`sktrellis._engine.posterior.TreePosterior`.
"""

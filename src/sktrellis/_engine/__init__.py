"""The compiled core of sktrellis (layer 3 of 3).

Everything here trusts its input and imports nothing above it (no energy,
no estimator): the estimators validate, the energies build potentials, and
this package runs the dynamic programs and searches on them.

- ``trellis``: the exact hierarchical and flat trellises (inside, outside,
  MAP, sampling) and the best-tree DPs over them;
- ``sparse``: the same dynamic programs over an explicit vertex set;
- ``search``: best-first AND/OR search with admissible bounds;
- ``agglomerative``: greedy and beam-search agglomeration;
- ``potential``: split potentials in C (the Ginkgo formula);
- ``tree``: conversion between the one internal tree record and scipy's
  linkage matrix, sklearn's ``children_`` and Newick;
- ``tables``: per-subset sums that potentials are built from.
"""

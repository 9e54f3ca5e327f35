"""The exact trellises: hierarchical and flat DPs over all 2^N subsets.

The posterior interface. Metrics and estimators read a fitted trellis (the
full ``HierarchicalTrellis`` or a ``SparseTrellis``) only through:

- ``n_points``, ``log_partition``, ``map_log_potential``;
- ``cluster_log_marginals()``: log P(C is a cluster of the tree) per
  cluster id (a subset mask for the full trellis, a vertex index for the
  sparse one);
- ``cluster_sums(values)``: the sum of per-point ``values`` over the points
  of every cluster id;
- ``split_blocks()``: an iterator of ``(parents, lefts, rights,
  log_probability)`` arrays of cluster ids covering every split (C; A, B)
  of non-zero probability once, with log P(C is a node split into A, B).
"""

"""Merge models: an energy's split potentials for clusters met one at a time.

The exact trellis tabulates all 2**N subsets. Agglomerative search (greedy,
beam search) and the sparse trellis instead meet clusters one at a time, for
N in the thousands. A merge model, built by ``energy.merge_model(X)``, names
clusters by integer ids -- the points are 0..N-1 and every new cluster gets
the next free id -- and keeps O(1) statistics per cluster (size, lowest
point, and what the energy needs: summed four-momenta, the weight inside the
cluster, a subset mask) so that the log potential of splitting a cluster into
two known clusters costs O(1).

Clusters are created in two ways:

* ``merge(a, b, others)`` joins two clusters of an agglomerative *forest*
  (the clusters of one partial clustering). ``others`` lists the forest's
  other clusters, against which the new cluster will later be scored; energies
  built on pairwise weights keep the cross sums between the new cluster and
  each of them, so scoring is O(1) per pair instead of O(|A| |B|).
* ``unions(parts, subsets, members)`` creates, at once, the union of each
  of many subsets of some disjoint clusters (the vertices a sparse trellis
  grows), from the parts' statistics and, for energies on pairwise weights,
  the cross sums between the parts' member points; statistics only.

Agglomerative search ranks candidate merges by ``scores(rows, cols)``, the
energy's *merge score*. For likelihoods (``GinkgoLikelihood``) and user
energies (``SplitEnergy``) it is the log potential of the split the merge
creates, as in the greedy and beam-search baselines of Greenberg et al.
(2021). An energy may add ``h(A | B) - h(A) - h(B)`` for some function ``h``
of a cluster: summed over any tree this telescopes to the same constant, so
the posterior, its MAP and the reported log potentials do not change, only
which merges look good *now* (hierarchical correlation clustering charges
each merge the negative weight inside the new cluster). Dasgupta's cost
needs more: bottom-up, its low splits are cheap whatever they cut, so it
ranks merges by average linkage (see ``_dasgupta.py``).
"""
import numpy as np


class MergeModel:
    """Base class: cluster ids, sizes and lowest points, grown as clusters are made.

    Subclasses register their per-cluster statistics with ``_add_column``
    and implement ``_combine``, ``split_log_potential`` and ``scores``;
    energies on pairwise weights derive from :class:`PairwiseMergeModel`
    instead.

    Parameters
    ----------
    n_points : int
    """

    def __init__(self, n_points):
        self.n_points = int(n_points)
        self.n_ids = self.n_points
        self._columns = []
        self._add_column("size", np.ones(self.n_points, dtype=np.int64))
        self._add_column("low", np.arange(self.n_points, dtype=np.int64))

    def __setstate__(self, state):
        # A fitted sparse trellis keeps its merge model for split_log_potential,
        # which gathers the columns at the trellis's ids: a model file may be
        # crafted, so every column must cover every id.
        n_points, n_ids, columns = (state.get(name) for name in ("n_points", "n_ids", "_columns"))
        if not (isinstance(n_points, int) and isinstance(n_ids, int) and 1 <= n_points <= n_ids
                and isinstance(columns, list) and {"size", "low"} <= set(columns)
                and all(isinstance(name, str) and isinstance(state.get(name), np.ndarray)
                        and state[name].ndim == 1 and len(state[name]) >= n_ids
                        for name in columns)):
            raise ValueError(
                f"a pickled {type(self).__name__} has columns that do not cover its "
                f"n_ids={n_ids!r} clusters: the file is damaged or was not written by sktrellis")
        self.__dict__.update(state)

    def _add_column(self, name, values):
        """A per-cluster statistic, stored as attribute ``name`` indexed by id."""
        self._columns.append(name)
        setattr(self, name, np.asarray(values))

    def _allocate(self, sizes, lows):
        """Ids for new clusters of the given sizes and lowest points."""
        ids = np.arange(self.n_ids, self.n_ids + len(sizes), dtype=np.int64)
        if ids.size and ids[-1] >= len(self.size):
            # Amortised doubling: ids are often created one merge at a time.
            capacity = max(2 * len(self.size), int(ids[-1]) + 1)
            for name in self._columns:
                old = getattr(self, name)
                grown = np.zeros(capacity, dtype=old.dtype)
                grown[: len(old)] = old
                setattr(self, name, grown)
        self.size[ids] = sizes
        self.low[ids] = lows
        self.n_ids += len(ids)
        return ids

    def unions(self, parts, subsets, members=None):
        """Create the union of each subset of the pairwise disjoint clusters ``parts``.

        Parameters
        ----------
        parts : array-like of int
            Ids of existing, pairwise disjoint clusters.
        subsets : list of tuple of int
            Each a set of two or more positions in ``parts``.
        members : list of ndarray of int, default=None
            The points of each part, needed by energies on pairwise weights
            (cross sums between parts, O(|A| |B|) per pair of parts).

        Returns
        -------
        ids : ndarray of int64
        """
        parts = np.asarray(parts, dtype=np.int64)
        indicator = np.zeros((len(subsets), len(parts)), dtype=bool)
        for row, subset in enumerate(subsets):
            indicator[row, list(subset)] = True
        lows = np.where(indicator, self.low[parts], np.iinfo(np.int64).max).min(axis=1)
        ids = self._allocate(indicator @ self.size[parts], lows)
        self._combine(ids, parts, indicator, members)
        return ids

    def _combine(self, ids, parts, indicator, members):
        """Statistics of the new clusters ids[k], the unions of parts[indicator[k]]."""
        raise NotImplementedError

    def merge(self, a, b, others):
        """Join clusters a and b of a forest whose other clusters are ``others``.

        Returns
        -------
        id : int
            The new cluster, which ``scores`` may then pair with ``others``.
        log_potential : float
            log psi of the split of the new cluster into a and b.
        """
        cluster = int(self.unions([a, b], [(0, 1)])[0])
        return cluster, float(self.split_log_potential([cluster], [a], [b])[0])

    def split_log_potential(self, parents, lefts, rights):
        """log psi of splitting each parents[k] into lefts[k] and rights[k].

        The two children must partition the parent; their order is free.

        Returns
        -------
        log_potential : ndarray of float64
        """
        raise NotImplementedError

    def scores(self, rows, cols):
        """Merge scores of each of ``rows`` with each of ``cols`` (higher is better).

        See the module docstring. Every pair must be two clusters of one
        forest; a cluster paired with itself is meaningless.

        Returns
        -------
        scores : ndarray of shape (len(rows), len(cols))
        """
        raise NotImplementedError

    def release(self, ids):
        """Forget the forest statistics of clusters no forest will score again."""

    def compact(self):
        """Keep only what ``split_log_potential`` needs: no more merges or unions."""


class PairwiseMergeModel(MergeModel):
    """Merge model of an energy built on sums of pairwise weights.

    Keeps, per cluster, the total of each weight matrix inside it
    (``inside``), and per forest the cross sums between its clusters:
    when ``merge`` creates c = a | b, its cross sums with every other cluster
    y of the forest are ``cross(a, y) + cross(b, y)``, stored in a row of
    length N at column ``low[y]``. Two clusters of one forest have different
    lowest points, and of two clusters alive together the later one (higher
    id) was created while the earlier was alive, so ``cross(x, y)`` is
    always in the later one's row at the earlier one's lowest point -- rows
    are never updated and forests can share them (beam search). The rows of
    the points are the weight matrices themselves and are never released:
    ``unions`` computes cross sums between arbitrary clusters from them.

    Subclasses give the energy's formulas ``_log_psi`` and ``_score`` over
    (size, inside) of the two children and their cross sums.

    Parameters
    ----------
    matrices : list of ndarray of shape (n, n)
        Symmetric weights with zero diagonal.
    """

    def __init__(self, matrices):
        n_points = len(matrices[0])
        super().__init__(n_points)
        self._n_matrices = len(matrices)
        for k in range(self._n_matrices):
            self._add_column(f"inside{k}", np.zeros(n_points))
        # Row r of the pool holds, at column j, the cross sums (one per
        # matrix) of the cluster owning row r with the cluster whose lowest
        # point is j. A forest needs at most N / 2 rows besides the points'.
        self._pool = np.empty((n_points + n_points // 4 + 16, n_points, self._n_matrices))
        for k, matrix in enumerate(matrices):
            self._pool[:n_points, :, k] = matrix
        self._add_column("row", np.arange(n_points, dtype=np.int64))
        self._free_rows = list(range(len(self._pool) - 1, n_points - 1, -1))

    def _allocate(self, sizes, lows):
        ids = super()._allocate(sizes, lows)
        self.row[ids] = -1
        return ids

    def __setstate__(self, state):
        n_matrices = state.get("_n_matrices")
        if not (isinstance(n_matrices, int) and n_matrices >= 1 and all(
                f"inside{k}" in state.get("_columns", ()) for k in range(n_matrices))):
            raise ValueError(
                f"a pickled {type(self).__name__} has _n_matrices={n_matrices!r} without "
                "a column of inside sums for each: the file is damaged or was not written "
                "by sktrellis")
        super().__setstate__(state)

    def _inside(self, ids):
        return [getattr(self, f"inside{k}")[ids] for k in range(self._n_matrices)]

    def _cross(self, x, y):
        """Cross sums between clusters x and y (broadcast id arrays), per matrix."""
        values = self._pool[self.row[np.maximum(x, y)], self.low[np.minimum(x, y)]]
        return [values[..., k] for k in range(self._n_matrices)]

    def _take_row(self):
        if not self._free_rows:
            old = len(self._pool)
            extra = max(16, old // 2)
            self._pool = np.concatenate([self._pool, np.empty((extra,) + self._pool.shape[1:])])
            self._free_rows = list(range(old + extra - 1, old - 1, -1))
        return self._free_rows.pop()

    def merge(self, a, b, others):
        others = np.asarray(others, dtype=np.int64)
        cross = [float(v) for v in self._cross(np.int64(a), np.int64(b))]
        cluster = int(
            self._allocate([self.size[a] + self.size[b]], [min(self.low[a], self.low[b])])[0]
        )
        for k, value in enumerate(cross):
            column = getattr(self, f"inside{k}")
            column[cluster] = column[a] + column[b] + value
        if others.size:
            row = self._take_row()
            self.row[cluster] = row
            # Searches score whole blocks before masking out a cluster paired
            # with itself: its own column must hold a number, not stale memory.
            self._pool[row, self.low[cluster]] = 0.0
            columns = self.low[others]
            self._pool[row, columns] = (
                self._pool[self.row[np.maximum(a, others)], self.low[np.minimum(a, others)]]
                + self._pool[self.row[np.maximum(b, others)], self.low[np.minimum(b, others)]]
            )
        log_psi = self._log_psi(
            self.size[a], self.size[b], self._inside(a), self._inside(b), cross
        )
        return cluster, float(log_psi)

    def _combine(self, ids, parts, indicator, members):
        # inside(union) = sum of the parts' insides + the cross sums of
        # every pair of its parts: one k x k matrix of cross sums per call.
        weights = indicator.astype(np.float64)
        cross = np.zeros((self._n_matrices, len(parts), len(parts)))
        points = self._pool[: self.n_points]
        for a, b in zip(*np.triu_indices(len(parts), 1)):
            if np.any(indicator[:, a] & indicator[:, b]):
                block = points[np.ix_(members[a], members[b])]
                cross[:, a, b] = cross[:, b, a] = block.sum(axis=(0, 1))
        for k in range(self._n_matrices):
            column = getattr(self, f"inside{k}")
            column[ids] = weights @ column[parts] + 0.5 * np.einsum(
                "sa,ab,sb->s", weights, cross[k], weights
            )

    def split_log_potential(self, parents, lefts, rights):
        parents, lefts, rights = (np.asarray(v, dtype=np.int64) for v in (parents, lefts, rights))
        inside_p, inside_l, inside_r = (self._inside(v) for v in (parents, lefts, rights))
        cross = [p - l - r for p, l, r in zip(inside_p, inside_l, inside_r)]
        return np.asarray(
            self._log_psi(self.size[lefts], self.size[rights], inside_l, inside_r, cross),
            dtype=np.float64,
        )

    def scores(self, rows, cols):
        rows = np.asarray(rows, dtype=np.int64)[:, None]
        cols = np.asarray(cols, dtype=np.int64)[None, :]
        return self._score(
            self.size[rows], self.size[cols], self._inside(rows), self._inside(cols),
            self._cross(rows, cols),
        )

    def release(self, ids):
        ids = np.asarray(ids, dtype=np.int64)
        ids = ids[ids >= self.n_points]
        rows = self.row[ids]
        self._free_rows.extend(rows[rows >= 0].tolist())
        self.row[ids] = -1

    def compact(self):
        # The pool holds the weight matrices: N**2 floats a fitted sparse
        # trellis does not need.
        self._pool = None
        self._free_rows = []

    def _log_psi(self, size_a, size_b, inside_a, inside_b, cross):
        """log psi(A, B) from sizes, per-matrix inside sums and cross sums."""
        raise NotImplementedError

    def _score(self, size_a, size_b, inside_a, inside_b, cross):
        """The energy's merge score of A and B, from the same statistics."""
        raise NotImplementedError

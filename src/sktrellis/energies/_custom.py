"""User-defined energies: split (hierarchical) and cluster (flat) potentials."""
import numpy as np

from .._engine._subsets import canonical_lefts, split_table_layout, subsets_by_size
from .._engine.potential._split_potential import SplitPotential
from .._validation import check_log_potentials
from ._base import FlatEnergy, HierarchicalEnergy
from ._merge import MergeModel

# Parents are handed to the user function in batches of about this many splits.
_BATCH_SPLITS = 1 << 20
# Clusters are handed to the user function in batches of this many.
_BATCH_CLUSTERS = 1 << 20
# Subsets reach the user function as int64 masks.
_MAX_MASK_POINTS = 62


class SplitEnergy(HierarchicalEnergy):
    """A hierarchical energy from a vectorised user function.

    ``func(X, left, right, **kw_args)`` receives the data and two int64
    arrays of subset masks (bit i set <=> row i of X is in the subset), the
    two children of many splits at once, and returns the float array of
    their log potentials ``log psi(left, right)``; ``-inf`` forbids a split.
    ``left`` always holds the lowest-numbered point of the parent, so the
    function need not be symmetric. It is called on every split of every
    subset once per fit (about 3**N / 2 splits), and the table is kept:
    8 bytes per split, so N <= 17 or so.

    Parameters
    ----------
    func : callable
        ``func(X, left, right, **kw_args) -> ndarray of shape (len(left),)``.
    kw_args : dict, default=None
        Extra keyword arguments of ``func``; grid-search them as
        ``energy__kw_args``.

    See Also
    --------
    ClusterEnergy : The flat counterpart, a potential per cluster.
    SplitPotential.from_cython : An O(1) energy as a compiled C function.
    Dasgupta : A built-in hierarchical energy, with fast separable tables.

    Examples
    --------
    Dasgupta's cost written by hand: splitting close points is expensive,
    the more so the larger the parent.

    >>> import numpy as np
    >>> from sktrellis import ExactHierarchicalClustering
    >>> from sktrellis.energies import SplitEnergy
    >>> def cross_closeness(X, left, right, scale=1.0):
    ...     bits = 1 << np.arange(len(X))
    ...     in_left = (left[:, None] & bits) > 0
    ...     in_right = (right[:, None] & bits) > 0
    ...     closeness = np.exp(-np.abs(X[:, 0][:, None] - X[:, 0][None, :]) / scale)
    ...     cut = np.einsum("si,ij,sj->s", in_left, closeness, in_right)
    ...     return -np.bitwise_count(left | right) * cut
    >>> X = np.array([[0.0], [0.1], [5.0], [5.2]])
    >>> energy = SplitEnergy(cross_closeness, kw_args={"scale": 1.0})
    >>> ExactHierarchicalClustering(energy).fit(X).labels_.tolist()
    [0, 0, 1, 1]
    """

    _parameter_constraints = {
        "func": [callable],
        "kw_args": [dict, None],
    }

    potential_kind = "table"

    def __init__(self, func, kw_args=None):
        self.func = func
        self.kw_args = kw_args

    def scratch_bytes(self, n_points, n_features=None):
        """Count the bytes of one batch of arguments handed to ``func``, besides the split table.

        The table of all 3**N / 2 splits (8 bytes each) is counted from
        ``potential_kind = "table"``.

        Parameters
        ----------
        n_points : int
            Number of points.
        n_features : int, default=None
            Ignored: the batches do not depend on the features.

        Returns
        -------
        n_bytes : int
            Bytes of one batch.
        """
        # One batch of index arrays handed to func (uint32 and two int64
        # masks, its result and as much again for what a vectorised func
        # typically allocates).
        return 48 * min(3**n_points // 2, _BATCH_SPLITS)

    def split_potential(self, X):
        """Tabulate ``func`` on every split of every subset of the rows of X.

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features)
            Already checked to be finite 2-d float64 by the estimator.

        Returns
        -------
        potential : SplitPotential
            A ``"table"`` potential holding ``log psi(A, B)`` of every split.

        Raises
        ------
        ValueError
            If ``func`` returns a value that is NaN or +inf, or an array of
            the wrong shape.
        """
        self._validate_params()
        n_points = len(X)
        order, level_start = subsets_by_size(n_points)
        level_offset, rank_in_level, table_length = split_table_layout(n_points)
        table = np.empty(table_length)
        kw_args = self.kw_args or {}
        for size in range(2, n_points + 1):
            parents = order[level_start[size] : level_start[size + 1]]
            n_splits = (1 << (size - 1)) - 1
            batch = max(1, _BATCH_SPLITS // n_splits)
            for first in range(0, len(parents), batch):
                chunk = parents[first : first + batch]
                lefts = canonical_lefts(chunk).astype(np.int64)
                rights = chunk.astype(np.int64)[:, None] ^ lefts
                values = check_log_potentials(
                    self.func(X, lefts.ravel(), rights.ravel(), **kw_args),
                    "SplitEnergy function", (lefts.size,), "split",
                )
                start = level_offset[size] + first * n_splits
                table[start : start + values.size] = values
        return SplitPotential.table(n_points, table, level_offset, rank_in_level)

    def merge_model(self, X):
        """Incremental statistics for agglomerative search and sparse trellises.

        Clusters are int64 masks, so at most 62 points.

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features)
            Already checked to be finite 2-d float64 by the estimator.

        Returns
        -------
        model : MergeModel
            See :mod:`sktrellis.energies._merge`.
        """
        self._validate_params()
        if len(X) > _MAX_MASK_POINTS:
            raise ValueError(
                f"SplitEnergy hands subsets to its function as int64 masks, which hold "
                f"at most {_MAX_MASK_POINTS} points: n_samples={len(X)} is too many; use "
                "a built-in energy (Dasgupta, CorrelationClustering, GinkgoLikelihood) "
                "for larger data"
            )
        return _SplitMergeModel(self, X)


class _SplitMergeModel(MergeModel):
    """A SplitEnergy on clusters held as int64 masks; merges ranked by log psi."""

    def __init__(self, energy, X):
        super().__init__(len(X))
        self._add_column("mask", np.left_shift(1, np.arange(len(X), dtype=np.int64)))
        self._func = energy.func
        self._kw_args = energy.kw_args or {}
        self._X = X

    def _combine(self, ids, parts, indicator, members):
        # Disjoint masks: their sum is their union.
        self.mask[ids] = indicator.astype(np.int64) @ self.mask[parts]

    def _log_psi(self, masks_a, masks_b):
        """The user function on disjoint mask arrays, the lowest point's side first."""
        masks_a, masks_b = (np.ravel(v) for v in np.broadcast_arrays(masks_a, masks_b))
        parents = masks_a | masks_b
        lefts = np.where(masks_a & (parents & -parents), masks_a, masks_b)
        out = np.empty(parents.size)
        for first in range(0, parents.size, _BATCH_SPLITS):
            chunk = slice(first, first + _BATCH_SPLITS)
            left, right = lefts[chunk], parents[chunk] ^ lefts[chunk]
            values = check_log_potentials(
                self._func(self._X, left, right, **self._kw_args),
                "SplitEnergy function", (left.size,), "split",
            )
            out[chunk] = values
        return out

    def split_log_potential(self, parents, lefts, rights):
        return self._log_psi(self.mask[lefts], self.mask[rights])

    def scores(self, rows, cols):
        rows = np.asarray(rows, dtype=np.int64)
        cols = np.asarray(cols, dtype=np.int64)
        values = self._log_psi(self.mask[rows][:, None], self.mask[cols][None, :])
        return values.reshape(rows.size, cols.size)


class ClusterEnergy(FlatEnergy):
    """A flat energy from a vectorised user function.

    ``func(X, masks, **kw_args)`` receives the data and an int64 array of
    subset masks (bit i set <=> row i of X is in the cluster), many clusters
    at once, and returns the float array of their log potentials
    ``log E(C)``; ``-inf`` forbids a cluster. It is called once per fit on
    all 2**N - 1 non-empty subsets, in batches, and the table is kept.

    Parameters
    ----------
    func : callable
        ``func(X, masks, **kw_args) -> ndarray of shape (len(masks),)``.
    kw_args : dict, default=None
        Extra keyword arguments of ``func``; grid-search them as
        ``energy__kw_args``.

    See Also
    --------
    SplitEnergy : The hierarchical counterpart, a potential per split.
    FlatEnergy : The base class, for an energy tabulated by NumPy directly.
    CorrelationClustering : A built-in flat energy.

    Examples
    --------
    A k-means-like energy: a cluster costs its squared deviations from its
    mean, plus a fixed price per cluster.

    >>> import numpy as np
    >>> from sktrellis import ExactFlatClustering
    >>> from sktrellis.energies import ClusterEnergy
    >>> def compactness(X, masks, price=1.0):
    ...     members = (masks[:, None] >> np.arange(len(X))) & 1
    ...     sizes = members.sum(axis=1)
    ...     sums = members @ X
    ...     squares = members @ (X ** 2)
    ...     scatter = (squares - sums ** 2 / sizes[:, None]).sum(axis=1)
    ...     return -scatter - price
    >>> X = np.array([[0.0], [0.1], [5.0], [5.2]])
    >>> energy = ClusterEnergy(compactness, kw_args={"price": 1.0})
    >>> ExactFlatClustering(energy).fit(X).labels_.tolist()
    [0, 0, 1, 1]
    """

    _parameter_constraints = {
        "func": [callable],
        "kw_args": [dict, None],
    }

    def __init__(self, func, kw_args=None):
        self.func = func
        self.kw_args = kw_args

    def cluster_potential(self, X):
        """Tabulate ``func`` on every non-empty subset of the rows of X.

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features)
            Already checked to be finite 2-d float64 by the estimator.

        Returns
        -------
        log_potential : ndarray of shape (2**n_samples,)
            ``log E(C)`` of the cluster with mask C (bit i <=> row i of X);
            finite, or -inf for a forbidden cluster. Entry 0 (the empty set)
            is 0 and unused.

        Raises
        ------
        ValueError
            If ``func`` returns a value that is NaN or +inf, or an array of
            the wrong shape.
        """
        self._validate_params()
        n_points = len(X)
        kw_args = self.kw_args or {}
        table = np.zeros(1 << n_points)
        for first in range(1, 1 << n_points, _BATCH_CLUSTERS):
            masks = np.arange(first, min(first + _BATCH_CLUSTERS, 1 << n_points), dtype=np.int64)
            values = check_log_potentials(
                self.func(X, masks, **kw_args), "ClusterEnergy function", masks.shape,
                "cluster",
            )
            table[first : first + masks.size] = values
        return table

    def cluster_scorer(self, X):
        """Return a function scoring explicit clusters with ``func``, up to 62 points.

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features)
            Already checked to be finite 2-d float64 by the estimator.

        Returns
        -------
        score : callable
            ``score(clusters)``: ``func`` on the int64 masks of the clusters,
            each given as an array of row indices.
        """
        self._validate_params()
        n_points = len(X)
        if n_points > _MAX_MASK_POINTS:
            raise ValueError(
                f"ClusterEnergy hands clusters to its function as int64 masks, which hold "
                f"at most {_MAX_MASK_POINTS} points; n_samples={n_points} is too many: "
                "write a FlatEnergy with a cluster_scorer(X) method instead"
            )
        kw_args = self.kw_args or {}

        def score(clusters):
            masks = np.array([np.sum(np.left_shift(1, np.asarray(c, dtype=np.int64)))
                              for c in clusters], dtype=np.int64)
            return check_log_potentials(
                self.func(X, masks, **kw_args), "ClusterEnergy function", masks.shape, "cluster"
            )

        return score

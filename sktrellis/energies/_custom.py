"""User-defined split energies."""
import numpy as np
from sklearn.utils._param_validation import HasMethods

from .._trellis._hierarchical import SplitPotential, canonical_lefts, subsets_by_size
from .._validation import check_exact_size
from ._base import HierarchicalEnergy

# Parents are handed to the user function in batches of about this many splits.
_BATCH_SPLITS = 1 << 20


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

    Examples
    --------
    A Dasgupta-like cost from a distance matrix: splitting close points is
    expensive.

    >>> import numpy as np
    >>> from sktrellis import ExactHierarchicalClustering
    >>> from sktrellis.energies import SplitEnergy
    >>> def cross_closeness(X, left, right, scale=1.0):
    ...     bits = 1 << np.arange(len(X))
    ...     in_left = (left[:, None] & bits) > 0
    ...     in_right = (right[:, None] & bits) > 0
    ...     closeness = np.exp(-np.abs(X[:, 0][:, None] - X[:, 0][None, :]) / scale)
    ...     return -np.einsum("si,ij,sj->s", in_left, closeness, in_right)
    >>> X = np.array([[0.0], [0.1], [5.0], [5.2]])
    >>> energy = SplitEnergy(cross_closeness, kw_args={"scale": 1.0})
    >>> ExactHierarchicalClustering(energy).fit(X).labels_.tolist()
    [0, 0, 1, 1]
    """

    _parameter_constraints = {
        "func": [callable],
        "kw_args": [dict, None],
    }

    table_bytes_per_subset = 8

    def __init__(self, func, kw_args=None):
        self.func = func
        self.kw_args = kw_args

    def split_bytes(self, n_points):
        # The table (8 bytes per split) and one batch of index arrays handed
        # to func (uint32 and two int64 masks, its result and as much again
        # for what a vectorised func typically allocates).
        n_splits = 3**n_points // 2
        return super().split_bytes(n_points) + 8 * n_splits + 48 * min(n_splits, _BATCH_SPLITS)

    def split_potential(self, X):
        self._validate_params()
        n_points = len(X)
        check_exact_size(n_points, self.split_bytes(n_points), "SplitEnergy")
        order, level_start = subsets_by_size(n_points)
        rank_in_level = np.empty(1 << n_points, dtype=np.uint32)
        rank_in_level[order] = np.arange(1 << n_points) - level_start[np.bitwise_count(order)]
        sizes = np.arange(n_points + 1)
        per_level = np.zeros(n_points + 1, dtype=np.int64)
        per_level[2:] = (np.diff(level_start)[2 : n_points + 1]) * (
            (1 << (sizes[2:] - 1)) - 1
        )
        level_offset = np.concatenate([[0], np.cumsum(per_level)])[:-1]
        table = np.empty(int(per_level.sum()))
        kw_args = self.kw_args or {}
        for size in range(2, n_points + 1):
            parents = order[level_start[size] : level_start[size + 1]]
            n_splits = (1 << (size - 1)) - 1
            batch = max(1, _BATCH_SPLITS // n_splits)
            for first in range(0, len(parents), batch):
                chunk = parents[first : first + batch]
                lefts = canonical_lefts(chunk).astype(np.int64)
                rights = chunk.astype(np.int64)[:, None] ^ lefts
                values = np.asarray(
                    self.func(X, lefts.ravel(), rights.ravel(), **kw_args), dtype=np.float64
                )
                if values.shape != (lefts.size,):
                    raise ValueError(
                        f"SplitEnergy function returned shape {values.shape} for "
                        f"{lefts.size} splits; it must return one value per split"
                    )
                if np.any(np.isnan(values)) or np.any(values == np.inf):
                    raise ValueError(
                        "SplitEnergy function returned NaN or +inf; log potentials "
                        "must be finite or -inf (a forbidden split)"
                    )
                start = level_offset[size] + first * n_splits
                table[start : start + values.size] = values
        return SplitPotential.table(n_points, table, level_offset, rank_in_level)


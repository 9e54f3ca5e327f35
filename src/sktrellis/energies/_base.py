"""Base classes of the energy models: hierarchical (per split) and flat (per cluster)."""
import numpy as np
from scipy import sparse
from sklearn.base import BaseEstimator

# Largest N whose table of all subsets the default cluster_scorer reads.
_MAX_TABLE_POINTS = 20
# Entries of a dense block of (clusters x points) products a scorer holds at once.
_SCORER_BLOCK = 1 << 22


def cluster_indicator_blocks(clusters, n_points, width=None):
    """The 0/1 matrices (clusters x points) of consecutive blocks of ``clusters``.

    Yields (first cluster, CSR matrix), blocks of rows small enough that a
    dense (rows x ``width``) product (``width`` defaults to n_points) stays
    under ``_SCORER_BLOCK`` entries.
    """
    rows = max(1, _SCORER_BLOCK // max(width or n_points, 1))
    for first in range(0, len(clusters), rows):
        block = [np.asarray(c, dtype=np.int64) for c in clusters[first : first + rows]]
        sizes = [len(c) for c in block]
        indices = np.concatenate(block) if block else np.zeros(0, dtype=np.int64)
        indptr = np.concatenate([[0], np.cumsum(sizes)])
        yield first, sparse.csr_matrix(
            (np.ones(len(indices)), indices, indptr), shape=(len(block), n_points)
        )


class HierarchicalEnergy(BaseEstimator):
    """Base class of energies over binary trees: a log potential per split.

    A tree's log potential is the sum of ``log psi(A, B)`` over its inner
    nodes, where A and B are the two children. Parameters are plain
    constructor arguments, so an estimator's ``energy__<name>`` can be
    grid-searched.

    The contract of a subclass:

    - ``split_potential(X)`` validates X and returns a
      :class:`~sktrellis.energies.SplitPotential`, per-subset tables from
      which the kernels evaluate any split in O(1);
    - ``potential_kind`` names the kind it returns (``"separable"``,
      ``"function"`` or ``"table"``), ``table_bytes_per_subset`` the bytes
      per subset of a function potential's own tables and
      :meth:`scratch_bytes` what building them takes besides: from these
      the estimators account for a fit's peak memory, and refuse one that
      would not fit, before anything is allocated;
    - optionally ``merge_model(X)`` (:mod:`sktrellis.energies._merge`), for
      the greedy, beam-search and sparse-trellis estimators, and
      ``search_bound(X)``, an admissible bound on the cost of the best tree
      of any cluster, for ``BestFirstHierarchicalClustering``.

    For a new energy, the quickest route is :class:`SplitEnergy` with a
    vectorised function (one value per split, O(3**N) memory). An energy
    of the separable form ``f(S) + c(|S|) (g(A) + g(B))`` needs only NumPy
    tables and runs as fast as the built-in ones (gallery example "A new
    energy without kernel code"); any other O(1) energy runs as fast as a
    built-in one as a C function of a small Cython module of its own
    (:meth:`SplitPotential.from_cython`, gallery example "A new O(1)
    energy in Cython"). Neither needs an edit of the package.

    See Also
    --------
    FlatEnergy : The base class of energies over flat partitions.
    SplitEnergy : A hierarchical energy from a vectorised Python function.
    SplitPotential : The per-subset tables a hierarchical energy builds.
    sktrellis.ExactHierarchicalClustering : The exact posterior over trees of an energy.

    Examples
    --------
    A built-in energy's tables evaluate any split: here the Dasgupta
    potential of splitting {0, 1, 2} into {0} and {1, 2} (masks 0b111, 0b001),
    ``-|S| W(A, B) = -3 (1.0 + 0.5)`` and the Yule tree prior's ``log(1 / 2)``.

    >>> import numpy as np
    >>> from sktrellis.energies import Dasgupta, HierarchicalEnergy
    >>> energy = Dasgupta(affinity="precomputed")
    >>> isinstance(energy, HierarchicalEnergy)
    True
    >>> W = np.array([[0, 1.0, 0.5], [1.0, 0, 2.0], [0.5, 2.0, 0]])
    >>> energy.split_potential(W).evaluate([0b111], [0b001]).round(4).tolist()
    [-5.1931]
    """

    #: The kind of SplitPotential that split_potential builds: "separable"
    #: (``f(S) + c(|S|) (g(A) + g(B))``, the fast kernel path), "function"
    #: (a compiled function of per-subset tables, ``from_cython``) or
    #: "table" (every split tabulated). The memory estimate follows from it.
    potential_kind = "table"
    #: Bytes per subset of the tables of a "function" potential (the other
    #: kinds have a fixed layout), counted by the memory estimate.
    table_bytes_per_subset = 0

    def scratch_bytes(self, n_points, n_features=None):
        """Count the bytes the energy allocates besides its tables while building them (0 here).

        A description of the model, not a check: the estimators add it to
        the trellis's memory to decide whether a fit can be held.

        Parameters
        ----------
        n_points : int
            Number of points.
        n_features : int, default=None
            Number of features, for an energy whose temporaries grow with
            them; None counts what does not depend on the features.

        Returns
        -------
        n_bytes : int
            Bytes of temporaries at the peak of ``split_potential``.
        """
        return 0

    def split_potential(self, X):
        """Validate X and build the per-subset tables of every split potential.

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features)
            Already checked to be finite 2-d float64 by the estimator.

        Returns
        -------
        potential : SplitPotential
            The tables from which the trellis kernels evaluate
            ``log psi(A, B)`` of any split in O(1), of kind
            ``potential_kind``.
        """
        raise NotImplementedError

    def merge_model(self, X):
        """Validate X and build the incremental statistics of agglomerative search.

        Used by the greedy and beam-search baselines and by
        ``SparseTrellisClustering``, which meet clusters one at a time
        instead of tabulating all 2**N subsets.

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features)
            Already checked to be finite 2-d float64 by the estimator.

        Returns
        -------
        model : MergeModel
            See :mod:`sktrellis.energies._merge`.
        """
        raise NotImplementedError(
            f"{type(self).__name__} has no merge_model(X), so it only supports the "
            "exact trellis; the agglomerative and sparse estimators need one"
        )

    def search_bound(self, X):
        """Validate X and build the admissible bound of best-first search.

        ``BestFirstHierarchicalClustering`` prunes with it: for every cluster
        it gives a lower bound on the cost (minus log potential) of that
        cluster's best subtree, proven in its class docstring.

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features)
            Already checked to be finite 2-d float64 by the estimator.

        Returns
        -------
        bound : SearchBound
            A ``SearchBound`` (``sktrellis._engine.search._search_bounds``).
        """
        raise ValueError(
            f"best-first search needs an admissible bound, which {type(self).__name__} "
            "does not provide (Dasgupta, CorrelationClustering and GinkgoLikelihood do); "
            "use ExactHierarchicalClustering (N <= 25) or SparseTrellisClustering"
        )


class FlatEnergy(BaseEstimator):
    """Base class of energies over flat partitions: a log potential per cluster.

    A partition's log potential is the sum of ``log E(C)`` over its clusters
    C. Subclasses validate the input X they receive and tabulate log E of
    all 2**N subsets at once (vectorised), which the flat trellis reads in
    O(1). Parameters are plain constructor arguments, so an estimator's
    ``energy__<name>`` can be grid-searched.

    An energy describes its memory and the estimators account for it: before
    anything is allocated they add to the flat trellis
    ``table_bytes_per_subset`` per subset (the energy's table and its
    temporaries) and :meth:`scratch_bytes` (what else building the table
    takes, such as per-subset statistics), and refuse a fit that would not
    fit, naming :meth:`statistics_per_subset` and ``scratch_advice`` when
    the statistics are what does not fit.

    See Also
    --------
    HierarchicalEnergy : The base class of energies over binary trees.
    ClusterEnergy : A flat energy from a vectorised Python function.
    subset_sums : Per-subset sums, the building block of a vectorised table.
    sktrellis.ExactFlatClustering : The exact posterior over partitions of an energy.

    Examples
    --------
    Each cluster costs a fixed amount plus its spread along one feature,
    tabulated for all subsets with the package's subset tables:

    >>> import numpy as np
    >>> from sktrellis import ExactFlatClustering
    >>> from sktrellis.energies import FlatEnergy
    >>> from sktrellis.energies import subset_sizes, subset_sums
    >>> class Spread(FlatEnergy):
    ...     def __init__(self, cost=2.0):
    ...         self.cost = cost
    ...     def cluster_potential(self, X):
    ...         size = np.maximum(subset_sizes(len(X)), 1)
    ...         mean = subset_sums(X[:, 0]) / size
    ...         spread = subset_sums(X[:, 0] ** 2) - size * mean**2
    ...         return -self.cost - spread
    >>> X = np.array([[0.0], [0.2], [3.0], [3.1]])
    >>> ExactFlatClustering(Spread()).fit(X).labels_.tolist()
    [0, 0, 1, 1]
    """

    #: Bytes per subset taken by the energy's own table and its temporaries.
    table_bytes_per_subset = 16
    #: What to change when the energy's statistics would not fit in memory.
    scratch_advice = "use fewer samples or fewer features"

    def scratch_bytes(self, n_points, n_features=None):
        """Count the bytes the energy allocates besides its table while building it (0 here).

        A description of the model, not a check: the estimators add it to
        the table and the flat trellis to decide whether a fit can be held.

        Parameters
        ----------
        n_points : int
            Number of points.
        n_features : int, default=None
            Number of features, for an energy whose statistics grow with
            them; None counts what does not depend on the features.

        Returns
        -------
        n_bytes : int
            Bytes of temporaries at the peak of ``cluster_potential``.
        """
        return 0

    def statistics_per_subset(self, n_features):
        """Number of sufficient statistics the energy sums per subset (0 here: none).

        Parameters
        ----------
        n_features : int
            Number of features.

        Returns
        -------
        n_statistics : int
            Statistics per subset, named in a refusal for lack of memory.
        """
        return 0

    def cluster_scorer(self, X):
        """Validate X and return a function scoring explicit clusters of its rows.

        What :class:`~sktrellis.SparseFlatClustering` needs: the log
        potential of given clusters, for N far beyond a table of all 2**N
        subsets. This default reads that table (``cluster_potential``), so
        it only serves up to ``_MAX_TABLE_POINTS`` points; an energy that can
        score a cluster from its points overrides it.

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features)
            Already checked to be finite 2-d float64 by the estimator.

        Returns
        -------
        score : callable
            ``score(clusters) -> ndarray of shape (len(clusters),)``, the
            ``log E(C)`` of each cluster given as an array of row indices.
        """
        n_points = len(X)
        if n_points > _MAX_TABLE_POINTS:
            raise ValueError(
                f"{type(self).__name__} scores clusters only through a table of all "
                f"2**n_samples subsets, and n_samples={n_points} is more than "
                f"{_MAX_TABLE_POINTS}; give it a cluster_scorer(X) method scoring "
                "clusters from their points"
            )
        table = self.cluster_potential(X)

        def score(clusters):
            return table[[int(np.sum(np.left_shift(1, np.asarray(c, dtype=np.int64))))
                          for c in clusters]]

        return score

    def cluster_potential(self, X):
        """Validate X and tabulate the log potential of every cluster.

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features)
            Already checked to be finite 2-d float64 by the estimator.

        Returns
        -------
        log_potential : ndarray of shape (2**n_samples,)
            ``log E(C)`` of the cluster with mask C (bit i <=> row i of X);
            finite, or -inf for a forbidden cluster. Entry 0 (the empty set)
            is unused.
        """
        raise NotImplementedError


class TemperatureMixin:
    """The inverse temperature ``beta`` of an energy: a number, or ``"auto"``.

    ``"auto"`` is resolved by the exact estimators' ``fit``, which calibrate
    it against a bootstrap over the feature columns and store it as
    ``beta_`` (user guide: "Reading a posterior"). Anywhere else -- the
    energy used on its own, the search estimators, a precomputed matrix --
    ``"auto"`` means 1: the loss at the scale given.
    """

    def _beta_value(self):
        """beta as a float, 1 for an unresolved ``"auto"``."""
        return 1.0 if isinstance(self.beta, str) else float(self.beta)

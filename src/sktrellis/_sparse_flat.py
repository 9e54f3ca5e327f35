"""Sparse flat trellis: exact inference over the partitions spanned by chosen clusters."""
import hashlib
import itertools
import time
from numbers import Integral

import numpy as np
from scipy.cluster.hierarchy import linkage
from scipy.spatial.distance import squareform
from scipy.special import logsumexp
from sklearn.base import BaseEstimator, ClusterMixin, _fit_context, clone
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions, validate_params
from sklearn.utils.validation import check_is_fitted

from ._engine.multicut import greedy_agglomeration
from ._engine.sparse.sparse_flat import SparseFlatTrellis, TooManyStates
from ._engine.tree.conversion import merges_from_tree
from ._estimator import (
    ClusterPosteriorMixin, EnergyEstimatorMixin, clears_fit_state_on_failure,
    warn_if_spanned_share_small,
)
from ._calibration import (
    beta_adding_no_confidence, calibrate_sparse_partition_posterior, consensus_greedy_blocks,
    is_auto, uncalibrated_energy)
from ._validation import check_log_potentials, check_members, unit_exponent
from .energies import CorrelationClustering

# Linkages of the "linkage" builder on features; without features (a
# precomputed affinity) the ones defined on any dissimilarity.
_FEATURE_LINKAGES = ("ward", "average", "complete", "single")
_DISTANCE_LINKAGES = ("average", "complete", "single")
# Units (points, or blocks kept whole) of a window of the calibration's
# family, every partition of which is spanned: a pair of a window of w
# points is together in B(w-1)/B(w) of its partitions (B the Bell numbers),
# 0.18 at 10, 0.21 at 8, 0.26 at 6 and 0.33 at 4, so the posterior at small
# beta stays below the reference-null cap's level 0.3, and the humbler the
# windows the higher the cap. As many windows as hold _WINDOW units each,
# at most _LARGEST_WINDOW (its partitions' dynamic program costs about
# 3**w / w per point): 20 points make two windows of 10, not three of 6-7,
# whose cap left a planted subtype at 0.78.
_WINDOW = 8
_LARGEST_WINDOW = 12
# Lloyd iterations of each 2-means split of the bisecting tree.
_LLOYD_ITERATIONS = 20


class SparseFlatClustering(
    ClusterPosteriorMixin, EnergyEstimatorMixin, ClusterMixin, BaseEstimator
):
    """Exact inference over the partitions spanned by a chosen family of clusters.

    The flat counterpart of :class:`~sktrellis.SparseTrellisClustering`,
    for data beyond :class:`~sktrellis.ExactFlatClustering` (N in the tens
    to thousands). A family of clusters spans the partitions whose every
    cluster belongs to it (a cluster outside the family has zero potential:
    the sparse trellis of Greenberg et al. 2018, section 4). Over those
    partitions the flat trellis's dynamic programs give exactly the MAP
    partition, the log partition function, every cluster's marginal,
    co-clustering probabilities, the posterior over the number of clusters,
    the probability of any partition and i.i.d. samples. ``log_partition_``
    is a lower bound of the full log Z (``log_spanned_mass_lower_bound_``
    bounds the spanned set's share of the full posterior's mass from
    below), and the MAP is never worse than the
    best cut of any seed tree: with pairwise weights
    (``CorrelationClustering``) the default seeds include the greedy
    agglomeration's tree, so the MAP is never worse than the greedy
    correlation clustering either. With ``beta="auto"`` (the default) the
    posterior lives instead on the calibration's own family (see
    ``energy``), which holds a plain fit's MAP partition: its MAP is never
    worse than a fit's at the same numeric beta either.

    Seeds are the clusters of trees (every cut of a tree is then spanned;
    with one tree and a ``DirichletProcessMixture`` energy, ``log_evidence_``
    is the Bayesian hierarchical clustering bound of that tree), and clusters
    or partitions of your own. The family then grows around its MAP
    partition: around each MAP cluster B, the MAP clusters meeting the
    smallest seed-tree node strictly above B form a region, which is cut
    into up to k parts (its MAP clusters, split further as the tree splits
    them) and every union of parts joins the family, so the next MAP is at
    least as good as the best re-partition of any region. Rounds repeat
    while the MAP improves, for k = 3, ..., ``resplit_parts``, within
    ``max_vertices`` clusters.

    The dynamic program runs over *states*, the sets of points left after
    removing clusters of a partition first point first (N of them for the
    cuts of one tree); families that cross each other a lot need many.
    A growing round that would pass ``max_states`` is undone and growth stops.

    Parameters
    ----------
    energy : FlatEnergy, default=None
        Energy model scoring each cluster (see :mod:`sktrellis.energies`):
        ``CorrelationClustering``, ``DirichletProcessMixture`` or a
        ``ClusterEnergy`` (up to 62 points). None means
        ``CorrelationClustering()``. Its ``beta="auto"`` with the default
        family (``builder="linkage"``, no ``seed_clusters`` or
        ``seed_partitions``) is calibrated as for
        :class:`~sktrellis.ExactFlatClustering` (the feature bootstrap,
        capped by the reference null), over a family of the calibration's
        own instead of the seeds and growth below: the cuts of a bisecting
        2-means tree of X that never cuts a cluster which more than half
        of the greedy agglomeration's partitions of X and of 20 column
        resamples hold, and every partition of each window of 8 to 12
        consecutive units of its depth-first order, a unit being such a
        cluster or a point alone (up to 12 points without one, every
        partition). Once beta is found, a plain fit's MAP partition joins
        the family of X (as clusters of that tree), and beta is lowered
        where needed so that no three points all co-cluster above 0.3 (the
        references' level) or above 0.5 that did not before
        (``calibration_["plain_map_cap"]``, None when it was not).
        Why: at small beta the posterior is near-uniform over the spanned
        partitions, and the seed trees' cuts put three points of
        structureless data together at 0.5-0.95 there (chains: the first
        three points of a chain of k stay together in about 1 - 2/k of its
        cuts), so no beta could make them humble; a window of 8 points
        keeps a pair together in 877 / 4140 = 0.21 of its partitions. Each
        permuted reference of the cap gets the same family built on it; the
        bootstrap's minimiser is the greedy partition, and beta is the
        smallest whose expected excess loss is at most the bootstrap's.
        Measured (``benchmarks/bench_sparse_flat_auto.py``, 2000 genes):
        each planted subtype together at >= 0.996 and across-subtype
        co-clustering 0.000 (N = 40-200), three noise points together at
        most 0.23-0.30 (N = 40-200, 26 seeds); the fit costs 3-21 plain
        fits at the same beta. At N = 16-30 (seeds 0-7) every planted
        subtype together at >= 0.946 and three noise points together at
        most 0.29; up to 20 points or so
        :class:`~sktrellis.ExactFlatClustering` is exact as well.
        The numbers are relative to the spanned set; its share of the full
        posterior's mass is bounded from below by
        ``log_spanned_mass_lower_bound_``. With other families, or where the
        bootstrap does not apply (``affinity="precomputed"``, fewer than 10
        distinct columns), ``beta="auto"`` means 1, with a warning and the
        reason in ``calibration_``.
    builder : "linkage", callable or list of trees, default="linkage"
        Seed trees. "linkage": scipy's Ward, average, complete and single
        linkage trees of X (on features; average, complete and single on
        ``max(w) - w`` for a precomputed affinity), and, for an energy on
        pairwise weights w (``CorrelationClustering``), the tree of the
        greedy agglomeration that merges the two clusters of largest cross
        weight (one of its cuts is the greedy partition). A callable
        ``builder(X, random_state)`` returns a list of trees; a list of trees
        (possibly empty) is used as given. A tree is a scipy linkage matrix
        or an ``AgglomerativeClustering``-style ``children_`` array.
    seed_clusters : list of array-like of int, default=None
        Further clusters of the family, each given by its point indices.
    seed_partitions : list of array-like of shape (n_samples,), default=None
        Partitions (labels) whose clusters join the family.
    resplit_parts : int, default=6
        Largest number of parts a region is cut into when growing (at most
        ``2**resplit_parts - 1`` clusters per region); below 3 the family is
        not grown.
    max_vertices : int, default=None
        Bound on the number of clusters of the family reached by growing;
        None means ``100 * n_samples``. Seeds are always kept whole.
    max_states : int, default=50_000
        Bound on the number of states of the dynamic program.
    n_clusters : int, default=None
        If given, ``labels_`` and ``map_log_potential_`` are the best
        spanned partition into exactly this many clusters; the family is
        grown around the unconstrained MAP and the posterior quantities stay
        over all spanned partitions.
    random_state : int, RandomState instance or None, default=None
        Seed of a callable builder and of :meth:`sample` when it is called
        without one.
    verbose : int, default=0
        Print the family size, states and MAP after each growing round.

    Attributes
    ----------
    labels_ : ndarray of shape (n_samples,)
        The MAP partition among the spanned ones (with ``n_clusters``
        clusters when given), labels 0, 1, ... in order of each cluster's
        first point.
    log_partition_ : float
        Natural log of the summed potential of the spanned partitions, a
        lower bound of the log Z of
        :class:`~sktrellis.ExactFlatClustering`.
    map_log_potential_ : float
        Log potential of the partition in ``labels_``.
    n_partitions_ : int
        Number of spanned partitions of non-zero potential (exact).
    pairwise_probability_ : ndarray of shape (n_samples, n_samples)
        P(points i and j are in the same cluster | X) over the spanned
        partitions; the diagonal is 1. Computed on first access.
    n_clusters_probability_ : ndarray of shape (n_samples + 1,)
        P(the partition has k clusters | X) at index k, over the spanned
        partitions. Computed on first access.
    n_clusters_log_partition_ : ndarray of shape (n_samples + 1,)
        log of the summed potential of the spanned partitions with k
        clusters, at index k (``-inf`` where there are none).
    n_seed_trees_ : int
        Number of seed trees whose clusters all joined the family (every
        cut of those is spanned); the tree with the best cut always does,
        the others when ``max_states`` allows.
    n_vertices_ : int
        Number of clusters in the family (the N points included).
    n_states_ : int
        Number of states of the dynamic program (the empty set included).
    beta_ : float
        With an energy that has a temperature: the beta used.
    calibration_ : dict
        How ``beta_`` was set: ``"method"`` is "feature bootstrap"
        (calibrated, over the calibration's family), "fixed" (a numeric
        beta), "uncalibrated" (``beta="auto"`` taken as 1, with
        ``"reason"``) or None (an energy without a temperature); the other
        keys as ``ExactFlatClustering.calibration_``, and, when calibrated,
        ``"plain_map_joined"`` (whether the family spans a plain fit's MAP
        partition) and ``"plain_map_cap"`` (the beta to which joining it
        lowered ``beta_``, or None); ``"n_bootstrap_draws"`` is the
        number of columns each column resample behind the family's units
        drew, where fewer than all (genes in correlated blocks with no
        cluster structure found), else None.
    log_spanned_mass_lower_bound_ : float
        A certified lower bound on the natural log of the share of the full
        posterior's mass (over all Bell(N) partitions) that the spanned
        partitions hold, ``log(Z_spanned / Z_full)``, the share every
        probability reported is relative to: ``log_partition_`` less an
        upper bound on the full log Z (``correlation_log_partition_upper_bound``,
        O(N**2 log N), within 0.01-2.6 nats of the exact log Z at N = 9 on
        2000 genes, beta 1-100). At most 0; in log since the share can be far
        below the smallest float. NaN (unknown) for energies other than
        ``CorrelationClustering``, which have no such bound here. Unless
        the posterior is the calibrated one (``calibration_["method"] ==
        "feature bootstrap"``), the fit warns when this is NaN or below
        log(1/2).
    log_evidence_ : float
        Only with a ``DirichletProcessMixture`` energy: the log of the
        summed p(X, partition) over the spanned partitions, a lower bound
        of the DPM evidence log p(X).
    n_features_in_ : int
        Number of features (columns) of X.
    feature_names_in_ : ndarray of shape (n_features,)
        Names of the features, when X has string column names.

    See Also
    --------
    sktrellis.ExactFlatClustering : Every partition, N <= 25 or so.
    sktrellis.SparseTrellisClustering : The same idea over binary trees.
    sktrellis.baselines.BayesianHierarchicalClustering : The cuts of one tree.

    References
    ----------
    C. S. Greenberg, N. Monath, A. Kobren, P. Flaherty, A. McGregor,
    A. McCallum. Compact representation of uncertainty in clustering.
    NeurIPS 2018.

    Examples
    --------
    >>> from sklearn.datasets import make_blobs
    >>> from sktrellis import SparseFlatClustering
    >>> from sktrellis.energies import CorrelationClustering
    >>> X, _ = make_blobs(n_samples=60, centers=3, random_state=0)
    >>> model = SparseFlatClustering(CorrelationClustering(beta=1.0)).fit(X)
    >>> model.labels_.shape
    (60,)
    >>> model.n_partitions_ > 10**6
    True
    >>> bool(model.log_partition_ >= model.map_log_potential_)
    True
    >>> bool(model.log_spanned_mass_lower_bound_ <= 0)   # log of a share of the full mass
    True
    """

    _parameter_constraints = {
        "energy": [HasMethods(["cluster_scorer"]), None],
        "builder": [StrOptions({"linkage"}), callable, list],
        "seed_clusters": [list, None],
        "n_clusters": [Interval(Integral, 1, None, closed="left"), None],
        "seed_partitions": [list, None],
        "resplit_parts": [Interval(Integral, 0, None, closed="left")],
        "max_vertices": [Interval(Integral, 1, None, closed="left"), None],
        "max_states": [Interval(Integral, 2, None, closed="left")],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(self, energy=None, *, builder="linkage", seed_clusters=None,
                 seed_partitions=None, resplit_parts=6, max_vertices=None,
                 max_states=50_000, n_clusters=None, random_state=None, verbose=0):
        self.energy = energy
        self.builder = builder
        self.seed_clusters = seed_clusters
        self.seed_partitions = seed_partitions
        self.resplit_parts = resplit_parts
        self.max_vertices = max_vertices
        self.max_states = max_states
        self.n_clusters = n_clusters
        self.random_state = random_state
        self.verbose = verbose

    _default_energy = CorrelationClustering

    @clears_fit_state_on_failure
    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y=None):
        """Build the family of clusters of X and run the flat DPs over what it spans.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Features, or what the energy expects (an (n, n) matrix of signed
            weights for ``CorrelationClustering(affinity="precomputed")``).
        y : Ignored
            Not used, present for API consistency.

        Returns
        -------
        self : object
            Fitted estimator.
        """
        X = self._validate_training_data(X, ensure_min_samples=1)
        # The temperature is resolved here and nowhere else. beta="auto"
        # with the default family calibrates over a family of its own
        # (_calibration_trellis): the default seeds' spanned partitions put
        # three noise points together above 0.5 even at beta = 0.001
        # (benchmarks/bench_sparse_flat_calibration.py), so no beta could
        # make them humble.
        energy = self._energy()
        if self._calibrates(energy):
            families = {}   # the family of each data set met, for every beta tried
            energy, beta, (trellis, self.n_seed_trees_), self.calibration_ = \
                calibrate_sparse_partition_posterior(
                    energy, X, self.random_state,
                    lambda scaled, data: self._calibration_trellis(scaled, data, families),
                    lambda scaled: self._build_trellis(X, scaled))
            # The units of X's family drew fewer columns on correlated genes.
            consensus = families.get(_data_key(X), (None, None, None))[2]
            self.calibration_["n_bootstrap_draws"] = None if consensus is None else consensus[1]
            if self.calibration_["method"] == "feature bootstrap":
                energy, beta, trellis = self._join_plain_map(energy, X, trellis, consensus)
        else:
            energy, beta, self.calibration_ = uncalibrated_energy(
                energy, X,
                "SparseFlatClustering calibrates only its default family (builder='linkage', "
                "no seed_clusters or seed_partitions) of a CorrelationClustering energy: the "
                "partitions other families span can put three points of structureless data "
                "together above 0.5 at any beta")
            trellis, self.n_seed_trees_ = self._build_trellis(X, energy)
        if beta is not None:
            self.beta_ = beta
        n_points = len(X)
        if not trellis.log_partition > -np.inf:
            raise ValueError(
                f"every partition the family of {trellis.n_clusters} clusters spans over "
                f"these n_samples={n_points} points has zero potential under {energy!r}; "
                "seed it with other trees or clusters"
            )
        self._trellis = trellis
        self._pairwise = self._by_count = None   # computed on first access
        if self.n_clusters is None:
            self.labels_ = trellis.map_labels()
            self.map_log_potential_ = trellis.map_log_potential
        else:
            clusters = trellis.map_clusters_with_count(self.n_clusters)
            if clusters is None:
                feasible = np.flatnonzero(trellis.log_partition_by_count() > -np.inf)
                raise ValueError(
                    f"no partition the family spans over these n_samples={n_points} points "
                    f"has n_clusters={self.n_clusters} clusters of non-zero potential; the "
                    f"spanned numbers of clusters are {feasible.tolist()}"
                )
            self.labels_ = trellis.labels_of(clusters)
            self.map_log_potential_ = float(trellis.log_e[clusters].sum())
        self.log_partition_ = trellis.log_partition
        self.n_partitions_ = trellis.n_partitions()
        self.n_vertices_ = trellis.n_clusters
        self.n_states_ = trellis.n_states
        if hasattr(energy, "log_evidence"):
            self.log_evidence_ = energy.log_evidence(trellis.log_partition, n_points)
        self.log_spanned_mass_lower_bound_ = np.nan
        if isinstance(energy, CorrelationClustering):
            upper = correlation_log_partition_upper_bound(
                energy.weights(X), energy._beta_value())
            # Rounding must not make the share exceed one where the bound is exact.
            self.log_spanned_mass_lower_bound_ = float(min(trellis.log_partition - upper, 0.0))
        if self.calibration_["method"] != "feature bootstrap":
            # The calibrated family's numbers are two-sided at N = 16-200
            # (benchmarks/bench_sparse_flat_auto.py); any other posterior
            # over spanned partitions is only as good as their share.
            warn_if_spanned_share_small(self, self.log_spanned_mass_lower_bound_, "partitions")
        return self

    def _calibrates(self, energy):
        """Whether beta="auto" is calibrated: the default family, pairwise weights."""
        return (is_auto(energy) and hasattr(energy, "weights")
                and isinstance(self.builder, str) and not self.seed_clusters
                and not self.seed_partitions)

    def _calibration_trellis(self, energy, X, families):
        """The sparse flat trellis of the calibration's family of X under energy.

        ``_calibration_family`` of X. Why this family: at small beta
        the posterior is near-uniform over the spanned partitions, and for
        the reference-null cap to exist that must be humble. The cuts of a
        tree are not (below a node of k points, chained one point at a
        time, the first three stay together in about 1 - 2/k of its cuts;
        seed trees alone put three noise points together at 0.5-0.95 at
        beta = 0.001, N = 60), while windows spanned in full are (a pair of
        w points in B(w-1)/B(w) of their partitions), and bisecting splits
        are near balanced on structureless data. The windows cross no tree
        cluster more than their depth-first order makes them, so the
        states stay about N 2**w / w for windows of w units.
        """
        n_points = len(X)
        # The family does not depend on beta: built once per data set (X or
        # a permuted reference), keyed by its bytes.
        key = _data_key(X)
        if key not in families:
            order, clusters, units, n_draws = _calibration_family(energy, X)
            families[key] = (order, SparseFlatTrellis(n_points).new_clusters(clusters),
                             (units, n_draws))
        order, fresh, _ = families[key]
        try:
            return self._family_trellis(energy, X, order, fresh)
        except TooManyStates:
            raise ValueError(
                f"the calibration's family of these n_samples={n_points} points spans its "
                f"partitions through more than max_states={self.max_states} states; raise "
                "max_states or pass a numeric beta"
            ) from None

    def _family_trellis(self, energy, X, order, fresh):
        """The sparse flat trellis of the clusters ``fresh`` of X, solved in ``order``.

        Raises ``TooManyStates`` past ``max_states``.
        """
        scorer = energy.cluster_scorer(X)
        trellis = SparseFlatTrellis(len(X))
        trellis.add(fresh, check_log_potentials(
            scorer(fresh), f"{type(energy).__name__}.cluster_scorer", (len(fresh),), "cluster"))
        trellis.solve(order, self.max_states)
        return trellis

    def _join_plain_map(self, energy, X, calibrated, consensus):
        """Add a plain fit's MAP partition to the calibrated family of X, adding no confidence.

        The calibrated family is not grown around its MAP: on noise a plain
        fit's MAP (the default family grown around it) is 15-67 nats better
        at N = 40-80. Unless the calibrated family spans it already (as on
        planted subtypes), the family of X is built again with its clusters
        as nodes of the bisecting tree (``_calibration_family``), so the
        calibrated MAP is never worse (under ``CorrelationClustering`` the
        MAP does not depend on beta). A large block of near-centroid noise
        points can then take the posterior at the calibrated beta (three
        points together at 0.88, N = 80), where the references of the cap,
        each over its own family without such a block, stayed humble. So
        beta is lowered, where needed, to the largest at which no three
        points all co-cluster above 0.3 (the level the cap holds the
        references to) or above 0.5 that did not in the calibrated
        posterior (``beta_adding_no_confidence``): joining the MAP moves
        the MAP, not the confidence. At 0.5 alone the join took three
        noise points from 0.26-0.29 to up to 0.47 (N = 40).
        ``consensus`` is X's consensus units and their draws as the
        calibration's family found them (None: found again).
        Returns (energy, beta, trellis) and records in ``calibration_``
        whether the MAP is spanned (``"plain_map_joined"``; False when the
        family with it passes ``max_states`` or adds a confident triple at
        every beta, and the calibrated posterior stays) and
        ``"plain_map_cap"`` (None when beta was not lowered).
        """
        self.calibration_.update(plain_map_joined=True, plain_map_cap=None)
        labels = self._build_trellis(X, energy)[0].map_labels()
        if calibrated.log_potential_of(labels) > -np.inf:
            return energy, energy.beta, calibrated
        order, clusters, _, _ = _calibration_family(energy, X, labels, consensus)
        joined = SparseFlatTrellis(len(X)).new_clusters(clusters)
        try:
            beta, trellis = beta_adding_no_confidence(
                lambda beta: self._family_trellis(
                    clone(energy).set_params(beta=beta), X, order, joined),
                energy.beta, calibrated.pairwise_probability())
        except TooManyStates:
            beta = None
        if beta is None:
            self.calibration_["plain_map_joined"] = False
            return energy, energy.beta, calibrated
        if beta < energy.beta:
            self.calibration_["plain_map_cap"] = beta
            energy = clone(energy).set_params(beta=beta)
        return energy, beta, trellis

    def _build_trellis(self, X, energy):
        """The grown sparse flat trellis of validated X, and how many seed trees joined whole."""
        n_points = len(X)
        start = time.perf_counter()
        random_state = check_random_state(self.random_state)
        source = f"{type(energy).__name__}.cluster_scorer"
        scorer = energy.cluster_scorer(X)

        def score(clusters):
            return check_log_potentials(scorer(clusters), source, (len(clusters),), "cluster")

        trees = self._seed_trees(X, energy, random_state)
        extra = [check_members(c, n_points) for c in self.seed_clusters or []]
        for labels in self.seed_partitions or []:
            labels = np.asarray(labels)
            if labels.shape != (n_points,):
                raise ValueError(
                    f"each of seed_partitions must be labels of shape (n_samples,) = "
                    f"({n_points},), got shape {labels.shape}"
                )
            extra.extend(np.flatnonzero(labels == label) for label in np.unique(labels))
        # The tree with the best cut is the base: its clusters join first and
        # its depth-first order numbers the points (its cuts then need only
        # N states), so the state budget goes to growing around the MAP.
        trees.sort(key=lambda merges: -self._best_cut(merges, score, n_points))
        order = _depth_first_leaves(trees[0], n_points) if trees else np.arange(n_points)
        trellis = SparseFlatTrellis(n_points)
        first = [np.array([i]) for i in range(n_points)] + extra
        first += _tree_clusters(trees[0], n_points) if trees else []
        fresh = trellis.new_clusters(first)
        trellis.add(fresh, score(fresh))
        try:
            trellis.solve(order, self.max_states)
        except TooManyStates:
            raise ValueError(
                f"the {trellis.n_clusters} seed clusters of these n_samples={n_points} points "
                f"span their partitions through more than max_states={self.max_states} "
                "states; raise max_states or give fewer seed clusters"
            ) from None
        self._report(trellis, "base tree", start)
        max_vertices = 100 * n_points if self.max_vertices is None else self.max_vertices
        self._grow(trellis, trees, score, max_vertices, start)
        # The other trees join whole, best cut first, while the states stay
        # within max_states: their cuts are then spanned too.
        n_seed_trees = min(len(trees), 1)
        for merges in trees[1:]:
            fresh = trellis.new_clusters(_tree_clusters(merges, n_points))
            if not self._try_add(trellis, fresh, score(fresh)):
                break
            n_seed_trees += 1
        self._report(trellis, "seed trees", start)
        return trellis, n_seed_trees

    def _grow(self, trellis, trees, score, max_vertices, start):
        """Grow the family around the MAP partition while the MAP improves."""
        # Widen the regions only once the narrower ones stop paying, as the
        # hierarchical sparse trellis does.
        if not trellis.map_log_potential > -np.inf:
            return   # no partition of non-zero potential to grow around
        for n_parts in range(3, self.resplit_parts + 1):
            while trellis.n_clusters < max_vertices:
                best = trellis.map_log_potential
                n_before = trellis.n_clusters
                # Number the points cluster by cluster of the MAP: the moves
                # and regions around it then cost the fewest states.
                try:
                    trellis.solve(trellis.map_block_order(), self.max_states)
                except TooManyStates:
                    pass   # the tables of the current order stay
                # Moves first: they are cheap in states and survive a halving.
                proposals = []
                for merges in trees:
                    proposals += trellis.grow_moves(trellis.tree_node_bits(merges), merges)
                for merges in trees:
                    proposals += trellis.grow_regions(
                        trellis.tree_node_bits(merges), merges, n_parts
                    )
                fresh = trellis.new_clusters(proposals)[: max_vertices - n_before]
                if not fresh:
                    break
                # Halve a round that needs too many states, down to about one
                # region's worth; past that the state budget is spent.
                log_e = score(fresh)
                while fresh and not self._try_add(trellis, fresh, log_e):
                    half = len(fresh) // 2 if len(fresh) >= 2**n_parts else 0
                    fresh, log_e = fresh[:half], log_e[:half]
                if not fresh:
                    return
                self._report(trellis, f"grown ({n_parts} parts)", start)
                if not trellis.map_log_potential > best:
                    break

    @staticmethod
    def _best_cut(merges, score, n_points):
        """Log potential of the best cut of a tree (a sparse flat trellis of its clusters)."""
        trellis = SparseFlatTrellis(n_points)
        clusters = [np.array([i]) for i in range(n_points)] + _tree_clusters(merges, n_points)
        trellis.add(clusters, score(clusters))
        trellis.solve(_depth_first_leaves(merges, n_points), n_points + 1)
        return trellis.map_log_potential

    def _try_add(self, trellis, fresh, log_e):
        """Add new clusters and solve; undo it past max_states. Whether they were added."""
        if not fresh:
            return True
        order = trellis.order
        n_before = trellis.n_clusters
        trellis.add(fresh, log_e)
        try:
            trellis.solve(order, self.max_states)
        except TooManyStates:
            trellis.truncate(n_before)   # the tables of the last solve stay
            return False
        return True

    def _seed_trees(self, X, energy, random_state):
        """The seed trees as validated (N - 1, 2) merge arrays."""
        n_points = len(X)
        builder = self.builder
        if isinstance(builder, str):
            if n_points < 2:
                return []
            # On pairwise weights the greedy agglomeration is the classical
            # correlation-clustering heuristic: with its tree a seed, the MAP
            # is never below its partition (linkage cuts can be far below).
            weights = energy.weights(X) if hasattr(energy, "weights") else None
            trees = [] if weights is None else [greedy_agglomeration(weights).merges]
            if getattr(energy, "affinity", None) == "precomputed":
                distances = weights.max() - weights
                np.fill_diagonal(distances, 0.0)
                condensed = squareform(distances, checks=False)
                return trees + [linkage(condensed, method)[:, :2].astype(np.int64)
                                for method in _DISTANCE_LINKAGES]
            # Linkage trees do not change when X is divided by a power of
            # two, and at unit scale squared distances cannot overflow.
            unit_X = np.ldexp(X, -unit_exponent(X))
            return trees + [linkage(unit_X, method)[:, :2].astype(np.int64)
                            for method in _FEATURE_LINKAGES]
        trees = builder(X, random_state) if callable(builder) else builder
        return [merges_from_tree(tree, n_points) for tree in trees]

    def _report(self, trellis, stage, start):
        if self.verbose:
            print(
                f"[{type(self).__name__}] {stage}: {trellis.n_clusters} clusters, "
                f"{trellis.n_states} states, {trellis.n_edges} edges, MAP log potential "
                f"{trellis.map_log_potential:.6g}, {time.perf_counter() - start:.2f} s",
                flush=True,
            )

    @property
    def pairwise_probability_(self):
        """P(i and j in one cluster | X) over the spanned partitions (computed once)."""
        trellis = self._fitted_posterior()
        if getattr(self, "_pairwise", None) is None:
            self._pairwise = trellis.pairwise_probability()
        return self._pairwise

    @property
    def n_clusters_log_partition_(self):
        """Log Z over the spanned partitions into k clusters, k = 0..n_samples (computed once)."""
        trellis = self._fitted_posterior()
        if getattr(self, "_by_count", None) is None:
            self._by_count = trellis.log_partition_by_count()
        return self._by_count

    @property
    def n_clusters_probability_(self):
        """P(number of clusters = k | X), k = 0..n_samples, over the spanned partitions."""
        return np.exp(self.n_clusters_log_partition_ - self.log_partition_)

    def together_probability(self, members):
        """Posterior probability that all ``members`` lie in one cluster.

        The sum of the marginals of the family's clusters that contain them
        (Greenberg et al. 2018, section 3), exact over the spanned
        partitions; for two points it is their entry of
        ``pairwise_probability_``.

        Parameters
        ----------
        members : array-like of int, or array-like of bool of shape (n_samples,)
            The points: their indices, or a mask.

        Returns
        -------
        probability : float
            P(the points ``members`` are in the same cluster | X), in [0, 1].
        """
        check_is_fitted(self)
        members = check_members(members, len(self.labels_))
        return float(np.exp(self._fitted_posterior().together_log_probability(members)))

    def log_probability(self, labels):
        """Natural log of P(partition | X) under the posterior over the spanned partitions.

        Parameters
        ----------
        labels : array-like of shape (n_samples,)
            Cluster label of every point; only which points share a label
            matters.

        Returns
        -------
        log_probability : float
            ``-inf`` for a partition the family does not span or with a
            forbidden cluster.
        """
        trellis = self._fitted_posterior()
        n_points = len(self.labels_)
        labels = np.asarray(labels)
        if labels.shape != (n_points,):
            raise ValueError(
                f"labels must have shape (n_samples,) = ({n_points},), got {labels.shape}"
            )
        if labels.dtype.kind == "f" and np.any(np.isnan(labels)):
            raise ValueError("labels must not contain NaN")
        # Rounding in log Z must not make a probability exceed one.
        return float(min(trellis.log_potential_of(labels) - self.log_partition_, 0.0))

    @validate_params(
        {"n_samples": [Interval(Integral, 1, None, closed="left")],
         "random_state": ["random_state"]},
        prefer_skip_nested_validation=True,
    )
    def sample(self, n_samples=1, random_state=None):
        """Draw partitions exactly from the posterior over the spanned partitions.

        Parameters
        ----------
        n_samples : int, default=1
            Number of partitions.
        random_state : int, RandomState instance or None, default=None
            Seed; None uses the estimator's ``random_state``.

        Returns
        -------
        labels : ndarray of shape (n_samples, n_points)
            One row of labels per partition, 0, 1, ... in order of each
            cluster's first point.
        """
        posterior = self._fitted_posterior()
        rng = check_random_state(self.random_state if random_state is None else random_state)
        return posterior.sample_labels(int(n_samples), rng)


def correlation_log_partition_upper_bound(weights, beta):
    """An upper bound on the log Z of correlation clustering over every partition.

    ``Z = sum over all partitions P of exp(beta * sum of w_ij over the pairs
    inside a cluster of P)``, which ``ExactFlatClustering`` sums exactly up
    to about 25 points; O(N**2 log N) here, for any N. Exact for zero
    weights (log Bell(N)) and up to N = 2. Measured: within 0.01-2.6 nats
    of the exact log Z at N = 9 on 2000 genes (beta 1-100), up to 78 on
    random normal weights of scale 3 at beta = 5 (the many positive pairs
    of each point are bounded as if all in one cluster). With weights of
    mean zero (``CorrelationClustering`` on features) Jensen's inequality
    gives log Z >= log Bell(N), and on 2000 noise genes at the calibrated
    beta this bound is 7-14 nats above log Bell(N) at N = 40 (beta 22-31),
    12 at N = 80 (beta 13), 19 at N = 200 (beta 5): that close to log Z.

    Parameters
    ----------
    weights : ndarray of shape (n_samples, n_samples)
        Symmetric signed weights, zero diagonal; ``-inf`` (a pair that may
        not share a cluster) allowed, ``+inf`` not.
    beta : float
        Non-negative inverse temperature.

    Returns
    -------
    log_upper : float
        At least the natural log of Z.
    """
    # Proof. Add the points one at a time, k = 1, ..., N - 1 (from 0). Let
    # Z_k(m) be the summed potential of the partitions of the points 0..k
    # into m clusters. Point k opens a cluster (factor 1) or joins a cluster
    # C of a partition of 0..k-1, multiplying its potential by exp(s(C)),
    # s(C) = beta * sum_{j in C} w_kj; so
    #     Z_k(m) = Z_{k-1}(m - 1) + sum over P of 0..k-1 into m clusters of
    #              potential(P) * sum_{C in P} exp(s(C))
    #            <= Z_{k-1}(m - 1) + Z_{k-1}(m) * h_k(m)
    # for any h_k(m) at least sum_{C in P} exp(s(C)) over every such P; all
    # terms are non-negative, so U_k(m) = U_{k-1}(m - 1) + U_{k-1}(m) h_k(m)
    # from U_0(1) = Z_0(1) = 1 bounds Z_k(m) by induction, and Z is at most
    # the sum over m of U_{N-1}(m). The bound h_k(m): call x_j =
    # beta * w_kj, j < k, positive for q of the j, with sum S of those.
    # (a) A cluster with a positive x_j has exp(s(C)) <= exp(s+(C)), s+ its
    # positive x_j's sum; for r such clusters, sum exp(s+) <= r - 1 +
    # exp(S), as (e^a - 1)(e^b - 1) >= 0 gives e^a + e^b <= 1 + e^(a + b)
    # for a, b >= 0, applied r - 1 times (and s+ sums to S).
    # (b) A cluster without one has exp(s(C)) <= max_{j in C} exp(x_j) (every
    # x_j <= 0 there): distinct clusters, distinct points, so m - r of them
    # give at most the sum of the m - r largest exp(x_j), x_j <= 0, each
    # at most 1.
    # With q >= 1, r >= 1 (the positive points lie somewhere) and r <=
    # min(q, m); raising r by one adds 1 in (a) and removes a term <= 1 in
    # (b), so r = min(q, m) gives the largest bound; with q = 0, (b) alone
    # with r = 0. A -inf weight gives exp(x_j) = 0, true for every partition
    # (the pair's cluster has potential 0), so the bound holds with them.
    weights = np.asarray(weights, dtype=np.float64)
    n_points = len(weights)
    if n_points == 0:
        return 0.0
    log_u = np.array([-np.inf, 0.0])   # log U_0(m), m = 0, 1
    # log 0 = -inf: an empty or forbidden term; a forbidden pair stays so at beta = 0.
    with np.errstate(divide="ignore", invalid="ignore"):
        for k in range(1, n_points):
            x = np.where(np.isneginf(weights[k, :k]), -np.inf, beta * weights[k, :k])
            positive = x > 0
            n_positive = int(np.count_nonzero(positive))
            largest = np.concatenate([[0.0], np.cumsum(np.sort(np.exp(x[~positive]))[::-1])])
            m = np.arange(1, k + 1)   # clusters of a partition of points 0..k-1
            if n_positive:
                r = np.minimum(n_positive, m)
                log_h = np.logaddexp(x[positive].sum(), np.log(r - 1 + largest[m - r]))
            else:
                log_h = np.log(largest[m])
            grown = np.full(k + 2, -np.inf)
            grown[1 : k + 1] = log_u[1:] + log_h
            grown[2:] = np.logaddexp(grown[2:], log_u[1:])
            log_u = grown
    return float(logsumexp(log_u))


def _data_key(X):
    """A digest of the bytes of X: the calibration builds one family per data set met."""
    return hashlib.blake2b(np.ascontiguousarray(X).tobytes(), digest_size=16).digest()


def _calibration_family(unit, X, map_labels=None, consensus=None):
    """The calibration's family of clusters of X: (order, clusters, units, n_draws).

    A bisecting 2-means tree of X (``_bisecting_tree``) that never cuts a
    *unit*: the points of a cluster most of the greedy partitions of X and
    of its column resamples hold (``consensus_greedy_blocks``, seeded by
    the data; on genes in correlated blocks with no cluster structure
    found, resamples of as many columns as they span directions), or a
    point alone. The family is the tree's clusters and every
    union of units of each window of ``_WINDOW`` to ``_LARGEST_WINDOW`` consecutive units
    of its depth-first ``order``, so that every partition of a window's
    units is spanned. Why units rather than points: a window of points
    that holds a whole planted group spans all its partitions, and at the
    reference-null cap's beta they took up to 0.93 of the mass from a group
    (N = 16-24); the resamples agree on such a group, and the windows
    then keep it whole (the tree's cuts still split it). On structureless
    data no cluster is held by most resamples (units are points) and the
    family is humble at small beta.

    Given ``map_labels`` (a partition of X), the tree also never cuts one
    of its clusters, and a unit is the part of a consensus cluster in one
    of them: the partition is then one of the tree's cuts, and each of its
    clusters a run of the order (as a cluster across the order, each would
    multiply the states of the dynamic program).

    Parameters
    ----------
    unit : CorrelationClustering
        An energy with ``weights`` (any numeric beta).
    X : ndarray of shape (n_samples, n_features)
    map_labels : ndarray of shape (n_samples,) or None, default=None
    consensus : tuple or None, default=None
        ``consensus_greedy_blocks``'s (labels, n_draws) for X, when known
        (they do not depend on beta: its rotation test costs 1-15 s at
        N = 120-200).

    Returns
    -------
    order : ndarray of shape (n_samples,)
        The tree's depth-first order of the points, each unit a run of it.
    clusters : list of ndarray
        The single points, the tree's clusters and the windows' unions.
    units : ndarray of shape (n_samples,)
        A label per point, shared by the points of a unit.
    n_draws : int or None
        The columns each of the units' resamples drew, where fewer than
        all (``consensus_greedy_blocks``); else None.
    """
    n_points = len(X)
    units, n_draws = consensus_greedy_blocks(
        unit, X, int.from_bytes(_data_key(X)[:4], "little"), effective=True) \
        if consensus is None else consensus
    levels = units
    if map_labels is not None:
        # The common refinement of the partition and the consensus blocks.
        _, units = np.unique(np.column_stack([map_labels, units]), axis=0,
                             return_inverse=True)
        units = units.ravel()
        levels = np.column_stack([map_labels, units])
    merges = _bisecting_tree(X, levels)
    order = _depth_first_leaves(merges, n_points)
    clusters = [np.array([i]) for i in range(n_points)]
    clusters += _tree_clusters(merges, n_points) + _window_clusters(order, units)
    return order, clusters, units, n_draws


def _tree_clusters(merges, n_points):
    """The point sets of the inner nodes of a tree given by its merges."""
    members = [np.array([i]) for i in range(n_points)]
    for a, b in merges:
        members.append(np.concatenate([members[a], members[b]]))
    return members[n_points:]


def _bisecting_tree(X, blocks):
    """The merges of a bisecting 2-means tree of the rows of X that never cuts a block.

    Each node's points are split by 2-means (Lloyd's iterations from the
    sign of the first principal component), down to single points; while a
    node holds several ``blocks`` (labels), each block goes whole to the
    side most of its points chose, so every block is a node. ``blocks`` of
    shape (n_samples, n_levels) are nested levels, coarse to fine, each
    refining the one before: a node is split between the blocks of the
    coarsest level of which it holds several. A split that
    leaves one side empty (identical rows) halves the points.
    On structureless data the splits are near balanced, unlike the chains
    agglomerative trees grow there. Everything is computed from the Gram
    matrix of the rows, once: O(N**2) per node whatever the number of
    features.
    """
    X = np.asarray(X, dtype=np.float64)
    n_points = len(X)
    levels = np.asarray(blocks).reshape(n_points, -1)
    centred = X - X.mean(axis=0)
    gram = centred @ centred.T
    # Split top-down (pre-order), then merge bottom-up (reversed pre-order
    # meets both parts of a node before the node).
    nodes, parts, pending = [], {}, [(np.arange(n_points), None, 0)]
    while pending:
        points, parent, which = pending.pop()
        node = len(nodes)
        nodes.append(points)
        if parent is not None:
            parts[parent][which] = node
        if len(points) > 1:
            side = _two_means(gram[np.ix_(points, points)])
            # The coarsest level of blocks the node holds several of.
            mixed = np.flatnonzero(levels[points].min(axis=0) != levels[points].max(axis=0))
            if len(mixed):
                labels = levels[points, mixed[0]]
                _, inverse = np.unique(labels, return_inverse=True)
                votes = np.bincount(inverse, weights=2.0 * side - 1.0)
                whole = votes[inverse] > 0
                # Ties and all blocks on one side: the largest block alone.
                if whole.all() or not whole.any():
                    whole = inverse == np.argmax(np.bincount(inverse))
                side = whole
            parts[node] = [None, None]
            pending.append((points[~side], node, 1))
            pending.append((points[side], node, 0))
    merges, index = [], {}
    for node in reversed(range(len(nodes))):
        if node in parts:
            merges.append(tuple(index[part] for part in parts[node]))
            index[node] = n_points + len(merges) - 1
        else:
            index[node] = int(nodes[node][0])
    return np.array(merges, dtype=np.int64).reshape(-1, 2)


def _two_means(gram):
    """A 2-means split of at least two rows given by their Gram matrix (a mask, never trivial)."""
    n_points = len(gram)
    side = np.zeros(n_points, dtype=bool)
    if n_points > 2:
        # Centre the rows; the first principal component is then the
        # leading eigenvector of the centred Gram matrix.
        gram = gram - gram.mean(axis=0) - gram.mean(axis=1)[:, None] + gram.mean()
        values, vectors = np.linalg.eigh(gram)
        if values[-1] > 0:
            side = vectors[:, -1] > 0
        for _ in range(_LLOYD_ITERATIONS):
            if side.all() or not side.any():
                break
            # Squared distance to a side's mean, less the shared |x_i|**2.
            distance = [gram[np.ix_(members, members)].mean() - 2 * gram[:, members].mean(axis=1)
                        for members in (side, ~side)]
            near = distance[0] < distance[1]
            if np.array_equal(near, side):
                break
            side = near
    if side.all() or not side.any():
        side = np.arange(n_points) < n_points // 2
    return side


def _window_clusters(order, blocks):
    """Every union of at least two points of the units of each window of consecutive units.

    The units are the runs of ``order`` whose points share a label of
    ``blocks`` (a block whole, or a point alone; each block is a run of a
    depth-first order of a tree of which it is a node). The windows hold
    near-equal numbers of consecutive units: as many windows as hold at
    least ``_WINDOW`` units each, and at most ``_LARGEST_WINDOW`` (fewer
    than ``_WINDOW`` units: one window). With the single points, every
    partition of a window's units is spanned, and a block is split only as
    the tree splits it.
    """
    order = np.asarray(order)
    starts = np.flatnonzero(np.r_[True, blocks[order[1:]] != blocks[order[:-1]]])
    units = np.split(order, starts[1:])
    n_windows = max(-(-len(units) // _LARGEST_WINDOW), len(units) // _WINDOW, 1)
    clusters = []
    for indices in np.array_split(np.arange(len(units)), n_windows):
        for size in range(1, len(indices) + 1):
            for chosen in itertools.combinations(indices, size):
                cluster = np.concatenate([units[i] for i in chosen])
                if len(cluster) >= 2:
                    clusters.append(cluster)
    return clusters


def _depth_first_leaves(merges, n_points):
    """The leaves of a tree in depth-first order: each tree cluster is then an interval."""
    if n_points < 2:
        return np.arange(n_points)
    leaves, stack = [], [n_points + len(merges) - 1]
    while stack:
        node = stack.pop()
        if node < n_points:
            leaves.append(node)
        else:
            a, b = merges[node - n_points]
            stack.extend((int(b), int(a)))
    return np.array(leaves, dtype=np.int64)

"""Past the trellis with a certificate: best-first AND/OR search for the MAP tree and log Z."""
import warnings
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, ClusterMixin, _fit_context, clone
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from ._estimator import EnergyEstimatorMixin, check_built_for, clears_fit_state_on_failure
from ._engine.search._best_first import MAX_EXACT_SIZE, MAX_POINTS
from ._engine.search.driver import DEFAULT_MAX_TIME, TrellisFallback, run_search
from ._engine.trellis.hierarchical_trellis import infeasible_error
from ._engine.tree.conversion import linkage_from_splits, merges_from_tree
from ._engine.agglomerative.builders import beam_search
from ._engine.resources import (
    MAX_EXACT_POINTS, effective_n_threads, fits_in_memory, hierarchical_fit_bytes,
)
from .energies import Dasgupta, GinkgoLikelihood
from ._sparse import SparseTrellisClustering


def _relative_gap(gap, log_potential):
    """``gap / |log_potential|``: 0 for no gap, inf for a gap over a log potential of 0."""
    if gap == 0.0:
        return 0.0
    return gap / abs(log_potential) if log_potential != 0.0 else np.inf


def _trellis_fits(energy, n_points):
    """Whether the exact trellis over all 2**n_points subsets fits in the memory available now.

    The exact estimators' limit (``check_exact_size``), without its error.
    """
    return (n_points <= MAX_EXACT_POINTS
            and fits_in_memory(hierarchical_fit_bytes(energy, n_points)))


###############################################################################
# Estimator

class BestFirstHierarchicalClustering(EnergyEstimatorMixin, ClusterMixin, BaseEstimator):
    """The exact MAP tree by best-first search, with a certified optimality gap.

    An AND/OR best-first search (AO*) over clusters finds the tree of
    largest log potential without tabulating the 2**N subsets of the
    trellis: clusters are created only when the search reaches them, keyed
    by their 64-bit mask (so at most 64 points), and the splits of a
    cluster are generated lazily, cheapest lower bound first. Lower bounds
    on the cost ``-log phi`` of the best subtree over each cluster
    (admissible, proven beside each bound in ``sktrellis._engine.search``) prune the
    rest. The search starts from the sparse trellis's or beam search's tree
    (the incumbent) and is anytime: when the budget runs out
    (``max_time``, a minute by default; ``max_states``, the memory; or
    Ctrl-C, which ends the search, not the program) it returns the best
    tree found with ``optimality_gap_``, the difference between its log
    potential and an upper bound on that of every tree (and
    ``relative_optimality_gap_``, the same as a fraction of the tree's
    ``|log potential|``). A gap of 0 means the tree is proven optimal.

    The same search brackets the partition function ``log Z`` (the log sum
    over every tree of its potential) from both sides at any time, and the
    probability that a cluster is a node of the tree under the Gibbs
    distribution (E. Dechter and R. Dechter's bounds by search): the lower
    bound sums the trees of the explored AND/OR graph, the upper bound adds
    for every unexplored part its number of trees times the admissible
    bound of its best tree. ``objective="log_partition"`` spends the search
    where that bracket is widest instead of on the MAP tree. The bracket is
    certified, never an estimate; it is exact only when
    ``log_partition_bounds_`` has two equal ends.

    Parameters
    ----------
    energy : Dasgupta, CorrelationClustering or GinkgoLikelihood, default=None
        Energy model; None means ``Dasgupta()``. Other energies have no
        admissible bound yet and are refused. The Ginkgo bound sees only
        the sizes of a tree's nodes (a few nats from the best tree's log
        likelihood), and a partial split through its sides' points and
        masses: clusters of up to 12 particles are solved exactly instead,
        jets of up to about 16 particles are proven optimal by the search
        alone (near-exhaustively), jets of up to 20-22 particles are solved
        by the trellis within minutes (``algorithm="auto"``), and past that
        the search reports its certified gap (at 25-30 particles 15-35 nats
        after a minute, measured in ``benchmarks/README.md``).
    max_time : float or None, default=60.0
        Stop after this many seconds (checked about every 0.1 s), keeping
        the best tree and its certified gap; None means no limit. The
        default is announced at ``verbose >= 1``; the incumbent's fit (a
        sparse trellis or beam search) counts in it. The search ends
        within a split of it, and the last revision of the log Z brackets
        gets what is left and at least 0.1 s (cut there, the bracket is
        still certified): measured on 20-30 particle Ginkgo jets and 48
        Dasgupta points, both objectives, fits end 0.02-0.09 s past
        ``max_time``.
    max_states : int, default=None
        Stop when this many search states are stored (clusters plus open
        partial splits of the lazy generators): the memory cap. None means
        as many as fit in half the memory this process can still allocate
        (the tightest of the host's available memory, ``RLIMIT_AS`` /
        ``ulimit -v`` and a cgroup limit, as the exact estimators find it;
        2 GiB if none is readable): a state takes about 64 bytes, plus
        penalties of its unassigned points for the Dasgupta and correlation
        bounds (measured peaks: 0.6 KB per state for Dasgupta at N = 40,
        1.1 KB at N = 64, 0.08 KB for Ginkgo). With
        ``objective="log_partition"`` every generated split counts as a
        state too (nothing is pruned, so they fill memory). The Ginkgo
        bound's table of the cluster bounds it has computed (up to 256 MiB)
        comes on top. If an allocation fails before the cap (memory taken
        by another process meanwhile), the search stops there as at the
        cap, keeping the best tree found.
    incumbent : {"sparse", "beam"}, default="sparse"
        The tree the search starts from: the MAP of a
        :class:`~sktrellis.SparseTrellisClustering` (seeded by beam search;
        better, slower) or the best beam-search tree. The returned tree is
        never worse than it.
    beam_width : int, default=5
        Width of the beam search behind the incumbent.
    n_clusters : int, default=2
        Number of flat clusters of ``labels_``, cut from the tree.
    verbose : int, default=0
        Print the bounds and the gap about once a second.
    objective : {"map", "log_partition"}, default="map"
        What the search works on: proving the MAP tree ("map"; splits that
        cannot beat the best tree known are never generated, so the log Z
        bracket is a by-product, often wide), or narrowing the log Z
        bracket ("log_partition"; no split is pruned, the walks go where
        the bracket is widest, and the MAP tree is a by-product).
    exact_size : int, default=None
        Clusters of at most this many points (0 to 20) are solved exactly,
        best tree and log Z, by the trellis recursion over their subsets
        when the search reaches them. None: the bound's choice (12 for
        Ginkgo, 2 otherwise), and 14 for "log_partition" where the bound
        makes none (3**14 / 2 splits a cluster, milliseconds for Dasgupta
        and HCC).
    tol : float, default=0.01
        With ``objective="log_partition"``, stop once the certified log Z
        bracket is at most this wide (nats); ignored for "map". The stop
        reads the root's bracket after each slice of the search (about
        0.1 s), every cluster's bracket revised from its parts first when
        a revision is due (about 1 % of the time: a walk revises only
        its own path, and the root's bracket as the walks leave it can be
        tens of nats wider); ``log_partition_bounds_`` is that bracket, or
        narrower.
    algorithm : {"auto", "search"}, default="auto"
        "search": the best-first search only. "auto": when the trellis can
        hold the whole set (at most 29 points, and its tables in the memory
        available), search for as long as the trellis's inside pass is
        estimated to take, and if the search has not finished by then
        (proof, or the bracket within ``tol``), solve every subset exactly
        by the trellis, within what is left of ``max_time``. The estimate
        is a quiet machine's: a pass that will not end in time (seen from
        its rate once a sixteenth of it is done, or past the deadline)
        gives up within one kernel call, and the search goes on for the
        rest of the budget. This takes at most about twice the time of the
        faster of the two on any data: structured data are proven by the
        search in a fraction of a pass, while a Ginkgo jet of 20 particles,
        whose bound leaves a gap of about 10 nats after minutes of search,
        is solved by the trellis in about a minute on two cores. The
        trellis is skipped when ``max_time`` cannot hold its estimated time.
    n_jobs : int, default=None
        OpenMP threads of the trellis when ``algorithm="auto"`` uses it
        (None: all cores, -1 as well, -2 all but one); the search itself
        runs on one thread.

    Attributes
    ----------
    labels_ : ndarray of shape (n_samples,)
        The tree cut into ``n_clusters`` clusters.
    linkage_matrix_ : ndarray of shape (n_samples - 1, 4)
        The best tree found, scipy format, heights as in
        :class:`~sktrellis.ExactHierarchicalClustering`.
    children_ : ndarray of shape (n_samples - 1, 2)
    distances_ : ndarray of shape (n_samples - 1,)
    n_leaves_ : int
    map_log_potential_ : float
        Log potential of the best tree found.
    log_potential_upper_bound_ : float
        An upper bound on the log potential of every tree.
    optimality_gap_ : float
        ``log_potential_upper_bound_ - map_log_potential_`` (>= 0), in nats;
        0.0 when proven optimal.
    relative_optimality_gap_ : float
        ``optimality_gap_ / |map_log_potential_|``: the gap as a fraction
        of the best tree's log potential, comparable across data sets and
        scales (0.0 when proven optimal; inf if the best tree's log
        potential is 0 and the gap is not). The best tree is within this
        fraction of the optimum: for a cost ``-log phi`` of either sign,
        ``|log phi(MAP) - log phi(tree)| <= relative_optimality_gap_ *
        |log phi(tree)|``.
    incumbent_log_potential_ : float
        Log potential of the tree the search started from.
    n_expanded_ : int
        Number of clusters whose splits were generated.
    n_splits_ : int
        Number of splits generated.
    n_clusters_stored_ : int
        Number of clusters the search created.
    n_iterations_ : int
        Number of walks from the root.
    log_partition_bounds_ : tuple of float
        ``(lower, upper)`` with ``lower <= log Z <= upper`` (certified; see
        ``cluster_probability_bounds`` for clusters), the clusters'
        brackets revised from their parts within ``max_time`` (a revision
        cut short still gives a certified bracket, with the root revised
        from its parts as they are: ``lower`` is at least
        ``map_log_potential_``, unless an allocation failed in the search,
        which then revises nothing).
    stop_reason_ : str
        "optimal" (MAP proven, or for "log_partition" the bracket at most
        ``tol`` wide), "max_time", "max_states" (the state cap, or an
        allocation that failed) or "interrupted".
    solver_ : {"search", "trellis"}
        What gave the results: the search, or the trellis over every
        subset (then the tree is the exact MAP, ``optimality_gap_`` is 0
        and ``log_partition_bounds_`` is exact; ``n_expanded_`` and the
        other counts are the search's before it). The fitted estimator
        then keeps the trellis's tables for ``cluster_probability_bounds``
        (tens of bytes per subset: about 50 MB at 20 points, 1.6 GB at
        25). Where several trees share the MAP value, the two may return
        different ones, so which one answers (it depends on the time the
        search had) can change ``labels_`` between such trees.
    n_features_in_ : int

    See Also
    --------
    sktrellis.ExactHierarchicalClustering : Every tree, up to N of about 25.
    sktrellis.SparseTrellisClustering : No certificate, any N.

    References
    ----------
    C. Greenberg, S. Macaluso, N. Monath, A. Dubey, P. Flaherty, M. Zaheer,
    A. Ahmed, K. Cranmer, A. McCallum. Exact and approximate hierarchical
    clustering using A*. UAI 2021.

    Examples
    --------
    Forty points, far past the trellis (2**40 subsets), proven optimal:

    >>> from sklearn.datasets import make_blobs
    >>> from sktrellis import BestFirstHierarchicalClustering
    >>> X, y = make_blobs(n_samples=40, centers=2, random_state=0)
    >>> model = BestFirstHierarchicalClustering(n_clusters=2).fit(X)
    >>> model.optimality_gap_
    0.0
    >>> bool(model.map_log_potential_ >= model.incumbent_log_potential_)
    True
    >>> model.n_clusters_stored_ < 10_000
    True

    The partition function of 30 points of three blobs, bracketed:

    >>> from sktrellis.energies import Dasgupta
    >>> X, y = make_blobs(n_samples=30, centers=3, random_state=0)
    >>> model = BestFirstHierarchicalClustering(
    ...     Dasgupta(beta=2.0), objective="log_partition", tol=0.5).fit(X)
    >>> lower, upper = model.log_partition_bounds_
    >>> bool(upper - lower <= 0.5)
    True
    >>> low, high = model.cluster_probability_bounds(np.flatnonzero(y == 0))
    >>> bool(0.0 <= low <= high <= 1.0)
    True
    """

    _parameter_constraints = {
        "energy": [HasMethods(["split_potential"]), None],
        "max_time": [Interval(Real, 0, None, closed="neither"), None],
        "max_states": [Interval(Integral, 1, None, closed="left"), None],
        "incumbent": [StrOptions({"sparse", "beam"})],
        "beam_width": [Interval(Integral, 1, None, closed="left")],
        "n_clusters": [Interval(Integral, 1, None, closed="left")],
        "verbose": ["verbose"],
        "objective": [StrOptions({"map", "log_partition"})],
        "exact_size": [Interval(Integral, 0, MAX_EXACT_SIZE, closed="both"), None],
        "tol": [Interval(Real, 0, None, closed="left")],
        "algorithm": [StrOptions({"auto", "search"})],
        "n_jobs": [Integral, None],
    }

    def __init__(self, energy=None, *, max_time=DEFAULT_MAX_TIME, max_states=None,
                 incumbent="sparse",
                 beam_width=5, n_clusters=2, verbose=0, objective="map", exact_size=None,
                 tol=0.01, algorithm="auto", n_jobs=None):
        self.energy = energy
        self.max_time = max_time
        self.max_states = max_states
        self.incumbent = incumbent
        self.beam_width = beam_width
        self.n_clusters = n_clusters
        self.verbose = verbose
        self.objective = objective
        self.exact_size = exact_size
        self.tol = tol
        self.algorithm = algorithm
        self.n_jobs = n_jobs

    _default_energy = Dasgupta

    @clears_fit_state_on_failure
    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y=None):
        """Search for the MAP tree of X until it is proven optimal or the budget ends.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Features, or an (n, n) matrix for ``affinity="precomputed"``.
        y : Ignored
            Not used, present for API consistency.

        Returns
        -------
        self : object
            Fitted estimator.
        """
        X = self._validate_training_data(X)
        self._check_mask_width(len(X))
        energy = self._uncalibrated_energy()
        result = run_search(
            energy.search_bound(X), len(X), lambda: self._incumbent(X, energy),
            objective=self.objective, exact_size=self.exact_size, tol=self.tol,
            max_time=self.max_time, max_states=self.max_states,
            trellis=self._trellis_fallback(X, energy), verbose=self.verbose,
            owner=type(self).__name__, bracket_log_partition=True)
        self._set_run_record(result)
        if result.trellis is not None:
            self._set_trellis_results(result.trellis, energy)
        else:
            self._set_search_results(result, energy)
        return self

    def _check_mask_width(self, n_points):
        """The search keys clusters by 64-bit masks: refuse more points before any work."""
        if n_points > MAX_POINTS:
            raise ValueError(
                f"{type(self).__name__} keys clusters by 64-bit masks: n_samples={n_points} "
                f"is more than {MAX_POINTS}; use SparseTrellisClustering"
            )

    def _set_run_record(self, result):
        """How the run went, from the driver's record, and a warning if it ended unproven."""
        self.stop_reason_ = result.stop_reason
        self.solver_ = result.solver
        self.incumbent_log_potential_ = result.incumbent_log_potential
        self.n_iterations_ = result.n_iterations
        self.n_expanded_ = result.n_expanded
        self.n_splits_ = result.n_splits
        self.n_clusters_stored_ = result.n_clusters_stored
        self._search, self._trellis = result.search, result.trellis
        if self.stop_reason_ != "optimal":
            self._warn_unfinished(result.search, result.trellis_note)

    def _incumbent(self, X, energy):
        """The tree the search starts from: ``(merges, log potential)``."""
        n_points = len(X)
        if self.incumbent == "beam":
            model = check_built_for(energy.merge_model(X), n_points, energy, "merge_model")
            tree = beam_search(model, self.beam_width)[0]
            return tree.merges, tree.log_potential
        if isinstance(getattr(energy, "beta", None), str):
            # beta="auto" means beta_ here, but the sparse estimator would
            # calibrate a temperature of its own (a bootstrap of fits, often
            # dearer than the search) and report its tree's log potential
            # at that temperature, not the search's.
            energy = clone(energy).set_params(beta=self.beta_)
        # Only its tree is wanted: not the bound on the share of log Z its
        # trees span (mass_bound_time, half a second of the budget), nor the
        # warning that its probabilities are relative to them: none is reported.
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*relative to the spanned trees")
            sparse = SparseTrellisClustering(energy, beam_width=self.beam_width,
                                             mass_bound_time=0).fit(X)
        return merges_from_tree(sparse.linkage_matrix_, n_points), sparse.map_log_potential_

    def _trellis_fallback(self, X, energy):
        """The exact trellis the search may hand over to (``algorithm="auto"``), or None."""
        n_points = len(X)
        if self.algorithm == "search":
            return None
        if isinstance(energy, GinkgoLikelihood):
            rate = "ginkgo"
        else:
            rate = "separable" if energy.potential_kind == "separable" else "generic"
        return TrellisFallback(
            rate=rate, fits=lambda: _trellis_fits(energy, n_points),
            split_potential=lambda: check_built_for(energy.split_potential(X), n_points,
                                                    energy, "split_potential"),
            n_threads=effective_n_threads(self.n_jobs))

    def _set_trellis_results(self, trellis, energy):
        """The fitted attributes from the trellis over every subset: exact."""
        trellis.check_feasible(energy)
        self._set_tree(linkage_from_splits(trellis.potential, *trellis.map_splits()),
                       self.n_clusters)
        self.map_log_potential_ = self.log_potential_upper_bound_ = trellis.map_log_potential
        self.optimality_gap_ = self.relative_optimality_gap_ = 0.0
        self.log_partition_bounds_ = (trellis.log_partition, trellis.log_partition)

    def _set_search_results(self, result, energy):
        """The fitted attributes from the search graph: its best tree and bounds."""
        search = result.search
        n_points = search.n_points
        if not np.isfinite(search.upper):
            if self.stop_reason_ == "optimal":
                raise infeasible_error(n_points, energy)
            raise ValueError(
                f"{type(self).__name__} found no tree of non-zero potential over these "
                f"n_samples={n_points} points under {energy!r} before it stopped "
                f"({self.stop_reason_}); raise max_time or max_states"
            )
        merges, log_potentials = search.merges()
        self._set_tree_from_merges(merges, log_potentials, energy)
        self.log_potential_upper_bound_ = -search.lower
        # Unless proven, from the tree returned: the root's own upper bound
        # may lag behind an improvement found through another of its splits.
        self.optimality_gap_ = 0.0 if search.solved else max(
            0.0, self.log_potential_upper_bound_ - self.map_log_potential_)
        self.relative_optimality_gap_ = _relative_gap(self.optimality_gap_,
                                                      self.map_log_potential_)
        self.log_partition_bounds_ = result.log_partition_bounds

    def __getstate__(self):
        # The search graph is C++ state: it is not pickled.
        state = super().__getstate__()
        state.pop("_search", None)
        state.pop("_trellis", None)
        return state

    def cluster_probability_bounds(self, members):
        """Bracket the probability that ``members`` form a node of the tree.

        Under the Gibbs distribution ``P(T) = phi(T) / Z``, ``P(C) = W(C) /
        Z`` with ``W(C)`` the sum over the trees holding the cluster C. W is
        bracketed by the explored graph as Z is (proof in
        ``BestFirstSearch.cluster_log_probability_bounds``): the trees of
        the explored graph that hold C from below, and from above those
        plus every tree under a part not explored yet. Then ``W_low / Z_high
        <= P(C) <= W_high / Z_low``. Tight for the clusters the search has
        explored around, weaker for the others. When the trellis solved the
        whole set (``solver_ == "trellis"``), P(C) is exact and both ends
        are equal (the first call runs its outside pass, about as long as
        the fit's inside pass).

        Parameters
        ----------
        members : array-like of int
            Indices of the cluster's points (at least one).

        Returns
        -------
        lower, upper : float
            ``lower <= P(C) <= upper``, within [0, 1].

        Examples
        --------
        >>> import numpy as np
        >>> from sktrellis import BestFirstHierarchicalClustering
        >>> from sktrellis.energies import Dasgupta
        >>> X = np.array([[0.0], [0.1], [5.0], [5.2], [9.0]])
        >>> model = BestFirstHierarchicalClustering(
        ...     Dasgupta(beta=1.0), objective="log_partition", tol=0.0).fit(X)
        >>> low, high = model.cluster_probability_bounds([0, 1])
        >>> bool(abs(high - low) < 1e-9)
        True
        """
        check_is_fitted(self, "log_partition_bounds_")
        trellis = getattr(self, "_trellis", None)
        search = getattr(self, "_search", None)
        # Pickles from before the trellis path have no solver_: the search's.
        solver = getattr(self, "solver_", "search")
        if (trellis if solver == "trellis" else search) is None:
            raise ValueError(
                "cluster_probability_bounds needs the search graph or the trellis, which "
                "are not pickled; fit the estimator again")
        members = np.unique(np.asarray(members, dtype=np.int64).ravel())
        if members.size == 0 or members[0] < 0 or members[-1] >= self.n_leaves_:
            raise ValueError(
                f"members must be 1 to {self.n_leaves_} indices of the n_samples="
                f"{self.n_leaves_} points, got {members.tolist()}")
        mask = 0
        for i in members:
            mask |= 1 << int(i)
        if members.size == 1 or members.size == self.n_leaves_:
            # Every tree holds the leaves and the root.
            return 1.0, 1.0
        if trellis is not None:
            probability = float(np.exp(trellis.cluster_log_marginal(members)))
            return probability, probability
        low, high = search.cluster_log_probability_bounds(mask)
        return float(np.exp(low)), float(np.exp(high))

    def _warn_unfinished(self, search, trellis_note):
        """Say that the budget ran out before the objective was reached, and where it stands."""
        if search.out_of_memory:
            trellis_note += (" (an allocation failed before the state cap: less memory was "
                             "left than found at the start; the best tree so far is kept)")
        if self.objective == "log_partition":
            # As the driver's last revision left it, within the budget.
            lower, upper = search.root_log_partition_bracket
            warnings.warn(
                f"{type(self).__name__} stopped ({self.stop_reason_}) before the log Z "
                f"bracket was {self.tol:g} wide{trellis_note}: {lower:.6g} <= log Z <= "
                f"{upper:.6g}; raise max_time or max_states, or tol",
                stacklevel=6,
            )
        else:
            relative = _relative_gap(search.gap, -search.upper)
            warnings.warn(
                f"{type(self).__name__} stopped ({self.stop_reason_}) before proving the tree "
                f"optimal{trellis_note}: its log potential is within {search.gap:.6g} nats "
                f"({relative:.3g} of its magnitude) of the best; raise max_time or "
                "max_states to close the gap",
                stacklevel=6,
            )

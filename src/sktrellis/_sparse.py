"""Sparse hierarchical trellis: exact inference over the trees spanned by chosen clusters."""
import time
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, ClusterMixin, _fit_context
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions

from ._estimator import (
    EnergyEstimatorMixin, TreePosteriorMixin, check_built_for, clears_fit_state_on_failure,
    warn_if_spanned_share_small,
)
from ._engine.trellis.hierarchical_trellis import double_factorial_trees
from ._engine.search._best_first import MAX_POINTS as MAX_SEARCH_POINTS, BestFirstSearch
from ._engine.search.driver import _LOG_PARTITION_EXACT_SIZE, final_log_partition_bounds
from ._engine.sparse.sparse_trellis import BaggedTrellis, SparseTrellis
from ._engine.tree.conversion import merges_from_tree
from ._engine.agglomerative.builders import beam_search, greedy_tree, gumbel_noise, replay_tree
from ._calibration import MAX_TREE_BOOTSTRAP, N_POSTERIOR_SAMPLES, calibrate
from .energies import Dasgupta
from .energies._tree_prior import split_log_prior

# States the search bounding the full log Z may hold (about 1-2 KiB each
# with the log Z objective): a cap far below the memory of the machine.
_MASS_BOUND_STATES = 100_000

# Parts each node of a bootstrap resample's tree is cut into when those
# trees span the calibrated trellis (every union of them becomes a vertex):
# 3, the node's rotations, at most two new vertices a node. With 4 parts
# noise spread more at N = 40-80 (largest cluster of 3..N-1 points 0.27-0.35
# against 0.35-0.48 at N = 80) but less at N = 200 (0.67 against 0.50):
# the more vertices a tree brings, the more the trees' neighbourhoods
# differ in how many trees they span, and the largest takes the mass.
_ROTATION_PARTS = 3

# No rotation of a bootstrap resample's tree cuts a cluster that at least
# this share of the resamples' trees hold: the bootstrap saw next to no
# alternative to it (pvclust's bootstrap probability >= 0.95), and the
# family of each tree holding it then holds it in every tree. A share,
# not unanimity, so that the rule does not tighten as the resamples grow
# in number: a subtype held by 97 of 100 resamples' trees, cut by the
# rotations (0.92 within each family), got 0.897 (N = 16, 150 genes; 0.967
# kept). Above one half, no two kept clusters cross.
_SETTLED_SHARE = 0.95


class SparseTrellisClustering(
    TreePosteriorMixin, EnergyEstimatorMixin, ClusterMixin, BaseEstimator
):
    """Exact inference over the binary trees spanned by a chosen set of clusters.

    For data beyond the exact trellis (N in the tens to thousands), the
    sparse trellis of Greenberg et al. (2021, section 3) keeps only some
    clusters as vertices -- here those of seed trees, grown around the best
    tree -- and allows every split of a vertex into two vertices. The
    dynamic programs of :class:`~sktrellis.ExactHierarchicalClustering` then
    run over that DAG: the MAP tree, the log partition function, the exact
    number of trees, cluster marginals and posterior samples, all exact
    *over the spanned trees* (usually astronomically many). Its MAP is never
    worse than the best seed tree, and its log Z is a lower bound of the
    full one.

    Seeds come from ``builder``. The trellis then grows around its MAP tree:
    each inner node is cut into k subtrees (breadth first from the node) and
    every union of them becomes a vertex, so the trellis spans every tree
    over those subtrees -- every rearrangement of the node, and any
    compatible set of rearrangements of different nodes. The MAP is
    recomputed and the round repeated while it improves, for k = 3 (the
    rotations of each node), 4, ... up to ``resplit_parts``, until
    ``max_vertices``. On toy jets of 9 particles the default MAP is within
    0.1 nats of the exact one on average, with 4 % of the trees spanned.

    Every probability it reports (cluster probabilities, samples,
    :meth:`log_probability`) is relative to the spanned trees: P(cluster |
    X, the tree is spanned). What share of the full posterior's mass the
    spanned trees hold is bounded from below, in log, by
    ``log_spanned_mass_lower_bound_`` (up to 64 points: the spanned log Z
    minus the best-first search's upper bound on the full log Z, found
    within ``mass_bound_time`` seconds; the share itself up to 14 points,
    where the search sums every tree at once, whatever the budget, and far
    below it from 16 points on) and unknown (NaN) past 64 points. It can
    be tiny: on a 20-particle Ginkgo jet (``make_jets(n_leaves=20,
    random_state=20)``) the spanned trees held e^-11.2 of the exact mass
    and their top clusters got 0.33-0.81, where the exact posterior gives
    them 0.000-0.046; at 40 points the bound found in half a second is
    about e^-100 to e^-250 (calibrated, 2000 genes) or e^-500 (beta = 1,
    5 features), true but no reassurance. So a fit whose posterior is not
    the calibrated bagged one warns when the bound does not show that the
    spanned trees hold at least half the mass. ``sparsity_`` is the
    fraction of trees spanned, not of mass.

    With ``beta="auto"`` (the default of ``Dasgupta`` and
    ``CorrelationClustering``) ``fit`` calibrates the temperature as the
    exact estimators do, with each bootstrap resample's minimum-loss tree
    from the seed search (a beam of ``beam_width``) and the posterior's
    expected loss from 200 exact draws; and the posterior is *bagged*: the
    mean, with equal weights, of B + 1 exact posteriors at ``beta_`` on the
    full data, one over the trees spanned around the MAP tree (the trellis
    a fit at the numeric ``beta_`` builds) and one over each bootstrap
    resample's tree with the rotations of each of its nodes (the two other
    trees over its child and grandchildren), save those that would cut a
    cluster 95 % or more of the resamples' trees hold:

    ``P(S) = 1 / (B + 1) * sum_{b = 0..B} P_beta(S is a cluster | X, T in F_b)``.

    A draw picks the data or one of the B resamples, then a tree from the
    Gibbs posterior over that resample's family F_b. It is not one Gibbs
    posterior over one set of trees; it is the bootstrap's spread of trees
    (as in pvclust, each resample counts once), each tree smoothed by the
    posterior over its neighbours. So a cluster that only k of the B + 1
    families span gets at most k / (B + 1), and a cluster a share f >= 0.95
    of the resamples' trees hold at least f B / (B + 1). One posterior over
    the union of the families instead gave each family mass by how many
    trees it spans: on noise at N = 120-200 one resample's family took most
    of the mass (clusters of 3..N-1 points at 0.50-0.72), and grown around
    the MAP tree alone, as at a numeric beta, a cluster most spanned trees
    share got 0.75-0.97 at any temperature. Bagged, on N x 2000 genes
    (``benchmarks/bench_sparse_humility.py``) planted subtypes get 1.000
    and noise clusters at most 0.09-0.23 at N = 40-200 (seeds 0-11 at 40,
    0-5 at 80, 0-1 at 120, 0-2 at 200), and the
    MAP tree is the one a fit at the numeric ``beta_`` finds. The calibration fits
    each temperature tried (the resamples' families built once, then
    rescaled) and draws 20-100 beam searches: 5-130 plain fits' time, 5-10
    on noise from 80 points on, 15-130 on planted data (100 resamples)
    (user guide, "Reading a posterior"). Then ``log_partition_`` is the
    MAP tree's family's, ``n_trees_`` and ``n_splits_`` are summed over
    the families (a tree two families span counts twice),
    ``n_vertices_`` counts distinct clusters, and
    ``log_spanned_mass_lower_bound_`` bounds the smallest family's share.
    Genes in correlated blocks vary less between column resamples than
    their few independent directions do, and the resamples' trees agree:
    where the columns span fewer independent directions than half their
    number (distinct columns) and
    the rotation test finds no cluster structure, each resample draws only
    that many columns (``calibration_["n_bootstrap_draws"]``; structureless
    40 x 3000 genes in blocks: clusters at 0.41-1.00 before, 0.09-0.24
    where the test finds nothing).

    Parameters
    ----------
    energy : HierarchicalEnergy, default=None
        Energy model scoring each split (see :mod:`sktrellis.energies`);
        None means ``Dasgupta()``. Its ``beta="auto"`` (the default) gives
        the bagged posterior above; a number, the one posterior over the
        trees grown around the MAP tree.
    builder : {"beam", "greedy", "sampled"}, callable or list of trees, default="beam"
        Seed trees. "beam": the ``n_seed_trees`` best trees surviving a beam
        search of width ``beam_width``, and the greedy tree
        (:mod:`sktrellis.baselines`). "greedy": the greedy tree. "sampled":
        the greedy tree and ``n_seed_trees - 1`` greedy runs on merge
        scores perturbed by fixed Gumbel noise (scale 1, in the units of the
        scores: log potential for ``GinkgoLikelihood``). A callable
        ``builder(X, random_state)`` returns a list of trees; a list of
        trees is used as given. A tree is a scipy linkage matrix or an
        ``AgglomerativeClustering``-style ``children_`` array, e.g. from a
        simulator or ``scipy.cluster.hierarchy.linkage``.
    n_seed_trees : int, default=5
        Number of seed trees of the "beam" and "sampled" builders.
    beam_width : int, default=5
        Width of the beam search of the "beam" builder.
    resplit_parts : int, default=8
        Largest number of subtrees a MAP node is cut into when growing (at
        most ``2**resplit_parts`` new vertices per node); below 3 the
        trellis is not grown.
    max_vertices : int, default=None
        Bound on the number of vertices grown; None means ``50 *
        n_samples``. Seeds are always kept whole.
    n_clusters : int, default=2
        Number of flat clusters of ``labels_``, cut from the MAP tree.
    mass_bound_time : float, default=0.5
        Seconds the best-first search may spend bounding the full log Z
        from above for ``log_spanned_mass_lower_bound_`` (15 to 64 points;
        it stops sooner once it has summed every tree, or at 100,000
        states; up to 14 points it sums every tree at once, whatever the
        budget); 0 skips it. The last revision of the search's brackets
        gets what is left and at least 0.1 s (cut there, the bound is still
        certified): the bound ends within about 0.1 s of this.
    random_state : int, RandomState instance or None, default=None
        Seed of the "sampled" builder, of a callable builder and of
        :meth:`sample` when it is called without one.
    verbose : int, default=0
        Print the vertices, splits and MAP after each growing round.

    Attributes
    ----------
    labels_ : ndarray of shape (n_samples,)
        The MAP tree cut into ``n_clusters`` clusters.
    linkage_matrix_ : ndarray of shape (n_samples - 1, 4)
        The MAP tree in scipy format, heights as in
        :class:`~sktrellis.ExactHierarchicalClustering`.
    children_ : ndarray of shape (n_samples - 1, 2)
        The merges of ``linkage_matrix_``, as in ``AgglomerativeClustering``.
    distances_ : ndarray of shape (n_samples - 1,)
        The heights of ``linkage_matrix_``.
    n_leaves_ : int
        Number of points.
    log_partition_ : float
        Natural log of the summed potential of the spanned trees (with
        ``beta="auto"``, of the MAP tree's family's).
    map_log_potential_ : float
        Log potential of the MAP tree among the spanned trees.
    seed_log_potentials_ : ndarray of shape (n_seeds,)
        Log potential of each seed tree: the builder's, then, with the
        calibrated ``beta="auto"``, each bootstrap resample's.
    n_vertices_ : int
        Number of clusters in the trellis (the N points included).
    n_splits_ : int
        Number of allowed splits (pairs of vertices partitioning a vertex).
    n_trees_ : int
        Number of spanned trees of non-zero potential (exact; with
        ``beta="auto"``, summed over the families).
    sparsity_ : float
        ``n_trees_ / (2N - 3)!!``, the fraction of all trees spanned; it
        underflows to 0.0 from about N = 150 on, where ``n_trees_`` stays exact.
    log_spanned_mass_lower_bound_ : float
        A certified lower bound on the natural log of the share of the full
        posterior's mass (over all (2N - 3)!! trees) that the spanned trees
        hold, ``log(Z_spanned / Z_full)``, the share every probability
        reported is relative to: ``log_partition_ - U`` (at most 0) with U
        the best-first search's upper bound on the full log Z. In log since
        the share can be far below the smallest float (about e^-500 at 40
        points on 5 features). NaN when unknown: past 64 points, for an
        energy without an admissible search bound, or with
        ``mass_bound_time=0``. Unless the posterior is the calibrated
        bagged one, the fit warns when this is NaN or below log(1/2).
    beta_ : float
        The inverse temperature, with an energy that has one: the energy's
        ``beta``, or the value ``beta="auto"`` calibrated to (above).
    calibration_ : dict
        How ``beta_`` was chosen, as for
        :class:`~sktrellis.ExactHierarchicalClustering`.
    n_features_in_ : int
        Number of features (columns) of X.

    See Also
    --------
    sktrellis.ExactHierarchicalClustering : Every tree, N <= 25 or so.
    sktrellis.baselines.BeamSearchHierarchicalClustering : The best seed.

    References
    ----------
    C. S. Greenberg, S. Macaluso, N. Monath, J.-A. Lee, P. Flaherty, K. Cranmer,
    A. McGregor, A. McCallum. Data structures & algorithms for exact inference
    in hierarchical clustering. AISTATS 2021.

    Examples
    --------
    >>> from sklearn.datasets import make_blobs
    >>> from sktrellis import SparseTrellisClustering
    >>> X, _ = make_blobs(n_samples=60, centers=3, random_state=0)
    >>> model = SparseTrellisClustering(n_clusters=3).fit(X)
    >>> model.labels_.shape
    (60,)
    >>> bool(model.map_log_potential_ >= model.seed_log_potentials_.max())
    True
    >>> model.n_trees_ > 10**20
    True
    >>> bool(model.log_spanned_mass_lower_bound_ <= 0)   # log of a share of the full mass
    True
    """

    _parameter_constraints = {
        "energy": [HasMethods(["merge_model"]), None],
        "builder": [StrOptions({"beam", "greedy", "sampled"}), callable, list],
        "n_seed_trees": [Interval(Integral, 1, None, closed="left")],
        "beam_width": [Interval(Integral, 1, None, closed="left")],
        "resplit_parts": [Interval(Integral, 0, None, closed="left")],
        "max_vertices": [Interval(Integral, 1, None, closed="left"), None],
        "n_clusters": [Interval(Integral, 1, None, closed="left")],
        "mass_bound_time": [Interval(Real, 0, None, closed="left")],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(self, energy=None, *, builder="beam", n_seed_trees=5, beam_width=5,
                 resplit_parts=8, max_vertices=None, n_clusters=2, mass_bound_time=0.5,
                 random_state=None, verbose=0):
        self.energy = energy
        self.builder = builder
        self.n_seed_trees = n_seed_trees
        self.beam_width = beam_width
        self.resplit_parts = resplit_parts
        self.max_vertices = max_vertices
        self.n_clusters = n_clusters
        self.mass_bound_time = mass_bound_time
        self.random_state = random_state
        self.verbose = verbose

    _default_energy = Dasgupta

    def _seed_trees(self, X, model, random_state):
        """The seed trees of the builder, as AgglomerativeTrees of ``model``."""
        builder = self.builder
        if isinstance(builder, str):
            if builder == "greedy":
                return [greedy_tree(model)]
            if builder == "beam":
                beam = beam_search(model, self.beam_width)[: self.n_seed_trees]
                return beam + [greedy_tree(model)]
            seeds = random_state.randint(np.iinfo(np.int32).max, size=self.n_seed_trees - 1)
            return [greedy_tree(model)] + [greedy_tree(model, gumbel_noise(int(s))) for s in seeds]
        trees = builder(X, random_state) if callable(builder) else builder
        trees = list(trees)
        if not trees:
            raise ValueError("the builder gave no seed trees; it must give at least one")
        return [replay_tree(model, merges_from_tree(tree, len(X))) for tree in trees]

    @clears_fit_state_on_failure
    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y=None):
        """Build the sparse trellis of X and run its dynamic programs.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Features, or what the energy expects (an (n, n) matrix for
            ``affinity="precomputed"``, (n, 4) four-momenta for Ginkgo).
        y : Ignored
            Not used, present for API consistency.

        Returns
        -------
        self : object
            Fitted estimator.
        """
        X = self._validate_training_data(X)
        n_points = len(X)
        random_state = check_random_state(self.random_state)
        bootstrap_trees, retemper = [], {}
        energy, beta, (trellis, seeds, model, _), calibration = calibrate(
            self._energy(), X, self.random_state,
            lambda scaled, calibrating: (
                *self._build(scaled, X, random_state, bootstrap_trees, retemper), scaled),
            self._seed_search_loss(X, bootstrap_trees), self._expected_loss,
            max_resamples=MAX_TREE_BOOTSTRAP, effective_resamples=True)
        if isinstance(trellis, BaggedTrellis) and trellis.trellises[-1].model is None:
            retemper.clear()   # the last temperature's families, before the final ones
            trellis, seeds, model = self._build(energy, X, random_state, bootstrap_trees)
        if beta is not None:
            self.beta_ = beta
            self.calibration_ = calibration
        families = trellis.trellises if isinstance(trellis, BaggedTrellis) else [trellis]
        if not all(family.log_partition > -np.inf for family in families):
            raise ValueError(
                f"every tree the sparse trellis spans over these n_samples={n_points} "
                f"points has zero potential under {energy!r}; seed it with other trees"
            )
        model.compact()
        self._trellis = trellis
        best = trellis.trellises[trellis.best] if isinstance(trellis, BaggedTrellis) else trellis
        merges, log_potentials = best.merges(best.map_splits())
        self._set_tree_from_merges(merges, log_potentials, energy)
        # The DP's own sums, so that one spanned tree gives log Z == MAP exactly.
        self.map_log_potential_ = trellis.map_log_potential
        self.log_partition_ = trellis.log_partition
        self.seed_log_potentials_ = np.array([tree.log_potential for tree in seeds])
        self.n_vertices_ = trellis.n_vertices
        self.n_splits_ = trellis.n_splits
        self.n_trees_ = trellis.n_trees()
        self.sparsity_ = self.n_trees_ / double_factorial_trees(n_points)
        self.log_spanned_mass_lower_bound_ = self._log_spanned_mass_lower_bound(energy, X)
        if not isinstance(trellis, BaggedTrellis):
            # The bagged posterior is calibrated as a whole (its numbers are
            # the bootstrap's spread, two-sided at N = 40-200); one posterior
            # over the trees around the MAP is only as good as their share.
            warn_if_spanned_share_small(self, self.log_spanned_mass_lower_bound_, "trees")
        return self

    def _log_spanned_mass_lower_bound(self, energy, X):
        """A lower bound on the log share of the full posterior's mass the spanned trees hold.

        ``log(Z_spanned / Z_upper)``, with ``Z_upper`` the best-first search's
        upper bound on the full partition function (E. Dechter and R.
        Dechter, "A note on bounding the partition function by search")
        after at most ``mass_bound_time`` seconds (its last revision of the
        brackets at least 0.1 s, ``final_log_partition_bounds``): certified at any time,
        and the share itself once the search has summed every tree, as it
        does at once up to 14 points, whatever the budget. NaN
        (unknown) past the search's ``MAX_SEARCH_POINTS`` points, for an
        energy without an admissible search bound, or with
        ``mass_bound_time=0``.
        """
        n_points = len(X)
        if self.mass_bound_time == 0 or n_points > MAX_SEARCH_POINTS:
            return np.nan
        try:
            bound = energy.search_bound(X)
        except ValueError:
            return np.nan   # no admissible bound: nothing certifies the share
        # Up to the driver's exact size the root is solved by the recursion
        # over its subsets when the search creates it: the share itself, in
        # less time than the default budget (0.1 s at 13 points, 0.4 s at 14
        # on a loaded machine), where a bounded search ends with a bound.
        search = BestFirstSearch(
            bound, n_points, objective="log_partition",
            exact_size=n_points if n_points <= _LOG_PARTITION_EXACT_SIZE else -1)
        start = time.perf_counter()
        while not search.finished:
            remaining = self.mass_bound_time - (time.perf_counter() - start)
            if remaining <= 0 or search.run(seconds=min(remaining, 0.1),
                                            max_states=_MASS_BOUND_STATES) == "max_states":
                break
        log_upper = final_log_partition_bounds(search, start + self.mass_bound_time)[1]
        # A bagged posterior's probabilities are means over its families,
        # each relative to its own spanned trees: the smallest share bounds them all.
        trellis = self._trellis
        log_spanned = (min(family.log_partition for family in trellis.trellises)
                       if isinstance(trellis, BaggedTrellis) else trellis.log_partition)
        if self.verbose:
            print(f"[{type(self).__name__}] full log Z <= {log_upper:.6g} "
                  f"({'exact' if search.finished else 'bound'}, "
                  f"{time.perf_counter() - start:.2f} s): log spanned mass >= "
                  f"{min(log_spanned - log_upper, 0.0):.6g}", flush=True)
        # Rounding must not make the share exceed one when the bound is exact.
        return float(min(log_spanned - log_upper, 0.0))

    def _build(self, energy, X, random_state, bootstrap_trees=(), retemper=None):
        """The sparse trellis of X under an energy with a numeric beta: seeded, grown, solved.

        With ``bootstrap_trees``, the bagged posterior over the family
        grown around the MAP tree and each tree's family. ``retemper``, a
        dict, keeps the trees' families of the first call and gives later
        calls those families rescaled to their beta (for the calibration's
        temperatures; the seeds returned then lack the bootstrap's trees).
        Returns the trellis, its seed trees and the merge model.
        """
        n_points = len(X)
        max_vertices = 50 * n_points if self.max_vertices is None else self.max_vertices
        start = time.perf_counter()
        model = check_built_for(energy.merge_model(X), n_points, energy, "merge_model")
        trellis = SparseTrellis(model)
        seeds = self._seed_trees(X, model, random_state)
        for tree in seeds:
            trellis.add_tree(tree)
        trellis.solve()
        self._report(trellis, "seeds", start)
        # Widen the neighbourhood only once the narrower one stops paying:
        # the vertex budget then goes where the MAP still moves.
        for n_parts in range(3, self.resplit_parts + 1):
            while trellis.n_vertices < max_vertices:
                best = trellis.map_log_potential
                if not trellis.grow(n_parts, max_vertices):
                    break
                trellis.solve()
                self._report(trellis, f"grown ({n_parts} parts)", start)
                if not trellis.map_log_potential > best:
                    break
        if not bootstrap_trees:
            return trellis, seeds, model
        # The calibrated posterior is bagged: the mean of B + 1 exact
        # posteriors, one over the family grown around the MAP tree (the
        # trellis above) and one over each bootstrap resample's tree with
        # the rotations of each of its nodes (_ROTATION_PARTS), none of
        # which cuts a cluster nearly every resample's tree holds
        # (_SETTLED_SHARE; at N = 80 planted subtypes fell to 0.89-0.96
        # where cut). One posterior over the union of these
        # families gave each family mass by how many trees it spans, not
        # by the data: on noise at N = 120-200 one resample's family took
        # most of the mass and its clusters got 0.5-0.72, and grown around
        # the MAP tree alone clusters of 3..N-1 points got 0.75-0.97. In
        # the mixture each resample weighs as much as in the bootstrap, as
        # each resample's tree counts once in pvclust's bootstrap
        # probability, and the full data's family keeps the MAP tree a fit
        # at the same numeric beta finds.
        if retemper is not None and retemper.get("beta"):
            # A split's log potential is -beta * loss + log prior: the
            # families of the last temperature tried, rescaled to this one.
            # fit builds the final posterior anew (retempered families have
            # no merge model).
            families = [trellis]
            for family in retemper["families"]:
                log_prior = split_log_prior(family.size[family.parent], energy.tree_prior)
                families.append(family.retempered(
                    (family.log_psi - log_prior) * (energy.beta / retemper["beta"]) + log_prior))
            bagged = BaggedTrellis(families)
            self._report(bagged, "bagged, the bootstrap's families retempered", start)
            return bagged, seeds, model
        resampled = [replay_tree(model, merges) for merges in bootstrap_trees]
        uncut = _settled_clusters(bootstrap_trees, n_points)
        families = [trellis]
        for tree in resampled:
            family = SparseTrellis(model)
            family.add_tree(tree)
            family.grow_tree(tree.merges, _ROTATION_PARTS, uncut=uncut)
            family.solve()
            families.append(family)
        if retemper is not None:
            retemper.update(beta=energy.beta, families=families[1:])
        bagged = BaggedTrellis(families)
        self._report(bagged, "bagged over the bootstrap's families", start)
        return bagged, seeds + resampled, model

    def _seed_search_loss(self, X, trees):
        """``map_loss`` of the calibration: the full-data loss of a data set's best beam-search tree.

        The bootstrap's minimisers come from the seed search (a beam of
        ``beam_width``), not from a sparse trellis each: 20-100 resamples
        at the cost of a beam search each. Each resample's tree (not X's)
        is appended to ``trees``: they span the calibrated trellis.
        """
        def loss(unit, data, cancelled=None):
            if cancelled is not None and cancelled.is_set():
                raise KeyboardInterrupt
            merges = beam_search(unit.merge_model(data), self.beam_width)[0].merges
            if data is not X:
                trees.append(merges)
            return -replay_tree(unit.merge_model(X), merges).log_potential
        return loss

    @staticmethod
    def _expected_loss(fitted, rng):
        """``expected_loss`` of the calibration: the mean unit loss of exact draws from the trellis.

        A split's log potential at beta is ``-beta * loss + log prior``
        (``tree_prior``, by the size of the cluster split), so each drawn
        tree's loss follows from the trellis's own table. From a bagged
        posterior each draw first picks its family.
        """
        trellis, energy = fitted[0], fitted[3]

        def losses(family, n_samples):
            splits = family.sample_splits(n_samples, rng)
            log_prior = split_log_prior(family.size[family.parent[splits]], energy.tree_prior)
            return -(family.log_psi[splits] - log_prior).sum(axis=1) / energy.beta

        if not isinstance(trellis, BaggedTrellis):
            return float(losses(trellis, N_POSTERIOR_SAMPLES).mean())
        families = trellis.draw_families(N_POSTERIOR_SAMPLES, rng)
        return float(np.concatenate([losses(trellis.trellises[b], int(np.sum(families == b)))
                                     for b in np.unique(families)]).mean())

    def _report(self, trellis, stage, start):
        if self.verbose:
            print(
                f"[{type(self).__name__}] {stage}: {trellis.n_vertices} vertices, "
                f"{trellis.n_splits} splits, MAP log potential "
                f"{trellis.map_log_potential:.6g}, {time.perf_counter() - start:.2f} s",
                flush=True,
            )


def _settled_clusters(trees, n_points):
    """The clusters of 2..N-1 points ``_SETTLED_SHARE`` of the trees hold, as a boolean (k, N) matrix.

    Held by more than half of the trees, no two of them cross, so every
    tree grown around them can keep them all.
    """
    def clusters(merges):
        members = [frozenset([i]) for i in range(n_points)]
        for a, b in merges:
            members.append(members[a] | members[b])
        return members[n_points:-1]

    counts = {}
    for merges in trees:
        for cluster in clusters(merges):
            counts[cluster] = counts.get(cluster, 0) + 1
    settled = [cluster for cluster, count in counts.items()
               if count >= _SETTLED_SHARE * len(trees)]
    uncut = np.zeros((len(settled), n_points), dtype=bool)
    for row, cluster in enumerate(sorted(settled, key=sorted)):
        uncut[row, list(cluster)] = True
    return uncut

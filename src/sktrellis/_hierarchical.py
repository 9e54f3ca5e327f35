"""Exact hierarchical clustering: the full cluster trellis over all binary trees."""
from numbers import Integral

from sklearn.base import BaseEstimator, ClusterMixin, _fit_context
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions

from ._estimator import (
    EnergyEstimatorMixin, TreePosteriorMixin, check_built_for, clears_fit_state_on_failure,
)
from ._engine.trellis.best_tree import max_clade_credibility_tree
from ._engine.trellis.hierarchical_trellis import HierarchicalTrellis
from ._engine.trellis.point_estimate import (
    N_OUTLIER_DRAWS, cluster_kernel, consensus_labels, keep_outliers_if_supported,
)
from ._engine.tree.conversion import (
    labels_from_linkage, linkage_from_splits, relabel_by_first_appearance,
)
from ._calibration import DEFAULT_SEED, calibrate_tree_posterior
from ._engine.resources import check_hierarchical_fit, effective_n_threads
from .energies import Dasgupta


class ExactHierarchicalClustering(
    TreePosteriorMixin, EnergyEstimatorMixin, ClusterMixin, BaseEstimator
):
    """Exact inference over all binary hierarchies with the cluster trellis.

    Fits the Gibbs distribution ``P(tree | X) = prod_splits psi / Z`` over all
    (2N-3)!! binary trees of N points, given an energy model that scores
    each split. A dynamic program over the 2**N subsets (Greenberg et al.
    2021) gives exactly, in O(3**N) time and O(2**N) memory: the MAP tree,
    the log partition function, the marginal probability of every cluster,
    the probability of any tree, and i.i.d. posterior samples.

    Parameters
    ----------
    energy : HierarchicalEnergy, default=None
        Energy model scoring each split (see :mod:`sktrellis.energies`);
        None means ``Dasgupta()`` (RBF similarities with a median-heuristic
        ``gamma``). Its parameters can be searched as ``energy__<name>``.
    n_clusters : int, default=2
        Number of flat clusters of ``labels_``.
    labels_from : {"posterior", "map_tree", "mcc_tree"}, default="posterior"
        Where ``labels_`` come from. "posterior": the partition into
        ``n_clusters`` clusters B that agrees best with the clusters C of
        the posterior's trees: it maximises the posterior expectation of
        the sum, over the clusters C of the tree and the clusters B, of
        ``|B & C|**2 / (|B| |C|)`` (a cluster C adds 1 when it is one of
        the B, less the more the B cut or dilute it). That expectation is
        exact, from every cluster's marginal; Ward's agglomeration then
        single-point moves find a local optimum of it. A block of one
        point claims an outlier, that the point joins the rest only once
        whole blocks have formed; it is kept only when that claim has
        posterior probability >= 0.5 (from 1,000 posterior trees, seeded
        by ``random_state``), otherwise it takes points from the other
        blocks: a humble posterior, close to the prior over trees, would
        set noise points apart on tiny differences. It costs the outside
        pass, 1.2-1.6 times the inside pass from N = 18 (later cluster
        queries reuse it). "map_tree": the MAP tree cut into
        ``n_clusters`` (its top ``n_clusters - 1`` merges undone), which
        keeps the MAP tree's root split even where that sets one outlier
        apart. "mcc_tree": the same cut of :meth:`max_clade_credibility_tree`.
        On 16 small labelled sets (iris, wine, digits, breast cancer; 18-20
        points) "posterior" has mean ARI 0.66, "map_tree" 0.53 and Ward's
        linkage 0.62 (``benchmarks/bench_point_estimate.py``).
    random_state : int, RandomState instance or None, default=None
        Seed of :meth:`sample` when it is called without one, and of the
        bootstrap calibrating an energy's ``beta="auto"`` (None: a fixed
        seed, so that the same data always get the same ``beta_``).
    verbose : int, default=0
        Progress of the dynamic program, on stderr: a first line with the
        pass's number of splits, its estimated time and the memory it
        needs, then a tqdm bar with the time left. 0: silent, as every
        estimator is by default (fits in a grid search or ``fit_many``
        print nothing). 1: only for passes estimated to take 10 s or more
        (on one thread, from N = 22 with Dasgupta, N = 19 with
        GinkgoLikelihood), so that a long fit says what it will cost
        before it starts (and can be stopped with Ctrl-C) while quick fits
        stay quiet. 2 or more: always.
    n_jobs : int, default=None
        OpenMP threads of the kernels; None uses all available cores, -1 as
        well, -2 all but one.

    Attributes
    ----------
    labels_ : ndarray of shape (n_samples,)
        ``n_clusters`` flat clusters (see ``labels_from``), numbered
        0, 1, ... in order of their first point.
    linkage_matrix_ : ndarray of shape (n_samples - 1, 4)
        The MAP tree in scipy format, children first; a node's height is the
        total energy ``-log psi`` of its subtree (shifted to be non-negative
        when some split has positive log potential), made strictly
        increasing by at most 1e-9 of the tree height so that
        ``fcluster(linkage_matrix_, k, "maxclust")`` cuts exactly its top
        k - 1 merges (``labels_`` with ``labels_from="map_tree"``).
    children_ : ndarray of shape (n_samples - 1, 2)
        The merges of ``linkage_matrix_``, as in ``AgglomerativeClustering``.
    distances_ : ndarray of shape (n_samples - 1,)
        The heights of ``linkage_matrix_``.
    n_leaves_ : int
        Number of points.
    tree_ : Tree
        The MAP tree as a :class:`~sktrellis.Tree` (Newick export, clusters, plot).
    log_partition_ : float
        Natural log of Z, the sum of the potentials of all trees.
    map_log_potential_ : float
        Log potential of the MAP tree.
    n_trees_ : int
        Number of trees with non-zero potential (exact; (2N-3)!! when no
        split is forbidden).
    beta_ : float
        The inverse temperature of the posterior, with an energy that has
        one (``Dasgupta``, ``CorrelationClustering``): the energy's
        ``beta``, or the value ``beta="auto"`` calibrated (see
        :class:`~sktrellis.energies.Dasgupta`). The calibration (bootstrap,
        then the cap over 3 permuted references, each a trellis with its
        cluster marginals) costs 18-34 plain fits at N = 20 and 33-56 at
        N = 12-16, where a plain fit takes a second or less (loaded
        machine, ``benchmarks/bench_calibration.py``); a numeric beta skips
        it.
    calibration_ : dict
        How ``beta_`` was chosen, with an energy that has a temperature:
        ``method`` ("feature bootstrap"; "tested-null" with 1-9 distinct
        feature columns, with a warning; "fixed" for a numeric beta;
        "uncalibrated" when ``beta="auto"`` found nothing to calibrate
        against and means 1, with a warning), for "tested-null" ``p_value``
        (SigClust's test of X against Gaussian references with its
        covariance), ``n_test_references`` (the references it drew,
        49-999, until its decision was sure), ``n_clusters_tested`` (its
        k) and ``branch`` ("gaussian
        null": significant at 0.05, beta_ the largest at which Gaussian
        references with X's within-cluster covariance show no cluster
        above ``null_level`` = 0.5, the 2nd smallest over 7 references,
        the covariance that of the tied-covariance Gaussian mixture with
        ``n_null_clusters`` clusters, k or more, that BIC prefers;
        "own posterior": beta_ the largest at
        which X's own posterior shows none above 0.3), with
        ``n_reference_fits`` its posteriors (it costs 1-30 plain fits on
        noise and 43-153 on three groups at N = 12, where a fit takes
        3-8 ms, and 2.5-10 at N = 18, on a loaded machine, with 3
        references for the null; its 7 cost 1.35 times that CPU time at
        N = 10-12 and 14-31 plain fits on three groups at N = 18; see
        "Reading a posterior", "Few features", for where it fails);
        ``n_effective_features``
        (duplicated or correlated columns counted once, see "Reading a
        posterior"), ``n_resamples`` (bootstrap resamples drawn),
        ``reason`` (why uncalibrated, else None), and the reference-null
        cap on the bootstrap's beta (None when uncalibrated): ``null_cap`` (the largest beta at
        which the posterior over X with its columns permuted gives nothing
        more than ``null_level``, the smallest over the
        ``n_reference_draws`` references: 3 permutations, plus 6 rotations
        where ``null_reference`` names them; sought only up to the bootstrap's beta, so equal
        to it when the cap does not bind; None when a permuted posterior
        supports something at every beta), ``null_cap_bound`` (whether it
        lowered beta_), ``null_level``, ``n_reference_draws`` and
        ``n_reference_fits`` (posteriors fitted over references: the cap's
        cost), ``rotation_p_value`` (a test of X against random rotations
        of its samples, which keep the columns' correlation) and
        ``null_reference`` ("permutation", or "permutation and rotation"
        where that test found no cluster structure and the cap was also
        taken over 6 rotated references at level 0.3, so that correlated
        columns do not pass for independent ones; see "Reading a
        posterior", "Copies and correlated columns"); ``n_bootstrap_draws``
        (None here: the sparse estimators' count of the columns each
        resample drew, where fewer than all).
    n_features_in_ : int
        Number of features (columns) of X.

    See Also
    --------
    sklearn.cluster.AgglomerativeClustering : Greedy hierarchical clustering.

    References
    ----------
    C. S. Greenberg, S. Macaluso, N. Monath, J.-A. Lee, P. Flaherty, K. Cranmer,
    A. McGregor, A. McCallum. Data structures & algorithms for exact inference
    in hierarchical clustering. AISTATS 2021.

    Examples
    --------
    >>> import numpy as np
    >>> from sktrellis import ExactHierarchicalClustering
    >>> X = np.array([[0.0, 0.0], [0.1, 0.0], [4.0, 4.0], [4.1, 4.2], [4.0, 4.3]])
    >>> model = ExactHierarchicalClustering(n_clusters=2).fit(X)
    >>> model.labels_.tolist()
    [0, 0, 1, 1, 1]
    >>> model.n_trees_
    105
    >>> round(model.cluster_probability([2, 3, 4]), 3)
    1.0
    """

    _parameter_constraints = {
        "energy": [HasMethods(["split_potential", "scratch_bytes"]), None],
        "n_clusters": [Interval(Integral, 1, None, closed="left")],
        "labels_from": [StrOptions({"posterior", "map_tree", "mcc_tree"})],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
        "n_jobs": [Integral, None],
    }

    def __init__(self, energy=None, *, n_clusters=2, labels_from="posterior", random_state=None,
                 verbose=0, n_jobs=None):
        self.energy = energy
        self.n_clusters = n_clusters
        self.labels_from = labels_from
        self.random_state = random_state
        self.verbose = verbose
        self.n_jobs = n_jobs

    _default_energy = Dasgupta

    @clears_fit_state_on_failure
    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y=None):
        """Run the exact trellis on X and store the MAP tree and log Z.

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
        n_points = X.shape[0]
        energy = self._energy()
        check_hierarchical_fit(energy, n_points, type(self).__name__)
        n_threads = effective_n_threads(self.n_jobs)

        def make_trellis(potential):
            potential = check_built_for(potential, n_points, energy, "split_potential")
            return HierarchicalTrellis(potential, n_threads, self.verbose, type(self).__name__)

        energy, beta, potential, trellis, calibration = calibrate_tree_posterior(
            energy, X, self.random_state, make_trellis, n_threads
        )
        if beta is not None:
            self.beta_ = beta
            self.calibration_ = calibration
        trellis.check_feasible(energy)
        self._trellis = trellis
        self.log_partition_ = trellis.log_partition
        self.map_log_potential_ = trellis.map_log_potential
        self.n_trees_ = trellis.n_trees
        self._set_tree(linkage_from_splits(potential, *trellis.map_splits()), self.n_clusters)
        if self.labels_from == "posterior":
            kernel = cluster_kernel(trellis.cluster_log_marginals(), n_points)
            # Trees drawn only where a point would stand alone, seeded like
            # the calibration (None: a fixed seed), so labels_ stay a
            # function of the data and random_state.
            rng = check_random_state(DEFAULT_SEED if self.random_state is None
                                     else self.random_state)
            labels = keep_outliers_if_supported(
                kernel, consensus_labels(kernel, self.n_clusters), self.n_clusters,
                lambda: trellis.sample_splits(N_OUTLIER_DRAWS, rng))
            self.labels_ = relabel_by_first_appearance(labels)
        elif self.labels_from == "mcc_tree":
            mcc_tree = self.max_clade_credibility_tree()[0]
            self.labels_ = labels_from_linkage(mcc_tree, self.n_clusters)
        return self

    def max_clade_credibility_tree(self):
        """The tree whose clusters have the largest product of posterior marginals.

        The maximum-clade-credibility (MCC) tree of phylogenetics, exact over
        all (2N - 3)!! trees: the same O(3**N) subset recursion as ``fit``,
        over the cluster log marginals (the first call runs the outside
        pass). It summarises the posterior by its best-supported clusters,
        where the MAP tree is its single most probable tree.

        Returns
        -------
        linkage : ndarray of shape (n_samples - 1, 4)
            The MCC tree in scipy format, heights as for ``linkage_matrix_``.
        log_credibility : float
            Sum of the log marginals of its clusters (0 when every cluster
            is certain).

        Examples
        --------
        >>> import numpy as np
        >>> from sktrellis import ExactHierarchicalClustering
        >>> X = np.array([[0.0], [0.2], [3.0], [3.1], [3.5]])
        >>> model = ExactHierarchicalClustering().fit(X)
        >>> linkage, log_credibility = model.max_clade_credibility_tree()
        >>> bool(np.exp(log_credibility) >= np.prod(model.clade_support()))
        True
        """
        trellis = self._fitted_posterior()
        log_credibility, parents, lefts = max_clade_credibility_tree(
            trellis.cluster_log_marginals(), trellis.n_threads, self.verbose, type(self).__name__,
        )
        return linkage_from_splits(trellis.potential, parents, lefts), log_credibility

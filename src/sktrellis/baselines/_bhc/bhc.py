"""Bayesian hierarchical clustering (Heller & Ghahramani 2005): greedy, sparse and exact trees."""
from numbers import Integral

import numpy as np
from scipy.cluster.hierarchy import linkage
from scipy.special import gammaln, logsumexp
from sklearn.base import BaseEstimator, ClusterMixin, _fit_context
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from ..._estimator import EnergyEstimatorMixin, clears_fit_state_on_failure
from ..._engine.trellis.best_tree import best_bhc_tree
from ..._engine.tree.conversion import linkage_from_heights, merges_from_splits
from ..._engine.resources import check_memory, effective_n_threads
from ..._validation import unit_exponent
from ...energies import DirichletProcessMixture
from ...energies._dpm import statistics_width
from ._covariance import covariance_types, exact_types_that_fit, with_covariance_type
from ._cut import cut, heights
from ._greedy import greedy_merges
from ._hyperparameters import fit_hyperparameters
from ._recursion import _ROWS_PER_SCORED_PAIR, _NodeTable, _block_rows, lower_bound
from ._spanned import _SEED_LINKAGES, best_spanned_merges

# New points x nodes whose predictive densities are evaluated at once.
_PREDICT_BLOCK = 1 << 16


class BayesianHierarchicalClustering(EnergyEstimatorMixin, ClusterMixin, BaseEstimator):
    """Bayesian hierarchical clustering (Heller & Ghahramani 2005).

    Agglomerative clustering under a Dirichlet process mixture (DPM) with
    conjugate components. Merging subtrees T_i and T_j into T_k compares
    the hypothesis that D_k is one cluster against all the partitions of
    D_k consistent with the subtrees, through the recursion (all in log
    space)::

        d_k = alpha Gamma(n_k) + d_i d_j,    pi_k = alpha Gamma(n_k) / d_k,
        p(D_k | T_k) = pi_k p(D_k | H1) + (1 - pi_k) p(D_i | T_i) p(D_j | T_j),
        r_k = pi_k p(D_k | H1) / p(D_k | T_k),

    with d = alpha and p(D | T) = p(D | H1) at the leaves, and greedily
    merges the pair of largest posterior merge probability r_k (by
    default, the greedy tree is then improved with two linkage trees, see
    ``algorithm``). The component marginal likelihoods p(D_k | H1) come
    from sufficient statistics, under the model ``energy``, a
    :class:`~sktrellis.energies.DirichletProcessMixture`: the exact DPM
    posterior of that energy (``ExactFlatClustering(model.energy_)``) is
    what BHC approximates.

    Parameters
    ----------
    energy : DirichletProcessMixture, default=None
        The model: the concentration ``alpha`` of the Dirichlet process,
        the component (``"gaussian"``, or ``"bernoulli"`` for X of 0 and 1
        only) and its conjugate priors, whose defaults are data-dependent
        empirical Bayes values (see
        :class:`~sktrellis.energies.DirichletProcessMixture`). None:
        ``DirichletProcessMixture()``. Its parameters can be searched as
        ``energy__<name>`` (``energy__alpha``). Fitting never changes it:
        the covariance types of ``covariance_type="auto"`` are tried on
        clones, hyperparameter learning rescales the component models built
        from it, and the energy of the tree is ``energy_``.
    covariance_type : {"auto"} or None, default="auto"
        Gaussian components. ``"auto"``: a tree for each of ``"full"``,
        ``"diag"`` and ``"spherical"`` (clones of ``energy`` with that
        ``covariance_type``, the other parameters shared; a
        ``covariance_prior`` array restricts them to its type, ``"diag"``
        for one scale per feature and ``"full"`` for a matrix), and the one
        of largest ``log_evidence_lower_bound_`` is kept
        (``covariance_type_``): the choice of covariance model by its
        marginal likelihood, as mclust chooses it by BIC (Fraley & Raftery
        2007). About three times the cost of one type; ``"full"`` is left
        out when its d**2 statistics per node would not fit in memory. The
        energy's ``covariance_type`` is then replaced, so it must be the
        default ``"full"`` (another type is refused, naming the way out).
        None: the energy's ``covariance_type`` only. Bernoulli components:
        ignored.
    n_clusters : int, default=None
        None: ``labels_`` is the paper's cut of the tree at the merges with
        r_k < 0.5. Otherwise the tree is cut into exactly this many clusters
        (the top ``n_clusters - 1`` rows of ``linkage_matrix_`` undone).
    algorithm : {"sparse", "greedy", "exact"}, default="sparse"
        ``"greedy"``: Heller & Ghahramani's agglomeration, O(N**2 log N)
        time and O(N**2) memory (about 16 N**2 bytes: the pair scores and
        their indices, 400 MB at N = 5,000, fitted in about 15 s here).
        ``"sparse"``: the greedy tree, Ward's and average linkage's trees
        (scipy) as seeds, and the tree of largest DPM lower bound among
        all the trees their clusters span (Greenberg et al. 2021's sparse
        trellis, see Notes); its bound is never below the greedy tree's,
        at the greedy cost plus two linkages. ``"exact"``: the tree with
        the largest DPM lower bound (largest ``d_T p(D | T)``) among all
        (2N - 3)!! binary trees, by a dynamic program over all 2**N
        subsets (O(3**N) time; about N <= 22). Its tables' memory is
        checked before any work: a covariance type whose tables would not
        fit is refused at once (with ``covariance_type="auto"``, left out of
        the candidates).
    hyperparameters : {"fixed", "learn"}, default="fixed"
        ``"fixed"``: the energy's ``alpha`` and component prior.
        ``"learn"``: maximise the DPM evidence lower bound
        ``log_evidence_lower_bound_`` (a proper marginal likelihood of the
        hyperparameters, unlike p(D | T), which is renormalised over the
        tree and rewards alpha -> 0) over the energy's ``alpha`` and the
        scale of its component prior (a factor on the covariance prior, or
        on both Beta pseudo-counts), EM-like (section "Learning and
        prediction"): the tree for the current values (E step), then both
        values for that tree by a bounded Nelder-Mead search in log space
        (M step), until the bound stops improving. Restarts from the given values and from
        alpha and scale 10 times smaller and larger; alpha stays within
        [1e-3, n_samples] and the scale within [1e-4, 1e4]. The best
        values found are ``alpha_`` and ``prior_scale_``.
    verbose : int, default=0
        ``"exact"``: progress of the dynamic program on stderr (an estimate
        of its time and memory, then a tqdm bar): 1 for a pass estimated
        to take 10 s or more, 2 or more always.
    n_jobs : int, default=None
        ``"exact"``: OpenMP threads; None uses all available cores, -1 as
        well, -2 all but one.

    Attributes
    ----------
    labels_ : ndarray of shape (n_samples,)
        Flat clusters, 0..k-1 in order of first appearance. Without
        ``n_clusters``: top-down from the root, a node is kept as one
        cluster when r_k >= 0.5 and split into its children otherwise. Given
        that its ancestors were split, r_k is the posterior probability
        that the node's points form one cluster (among the partitions
        consistent with the tree), so every decision of the cut is the more
        probable one.
    n_clusters_ : int
        Number of clusters of ``labels_``.
    energy_ : DirichletProcessMixture
        The energy of the tree: a clone of ``energy`` (of
        ``DirichletProcessMixture()`` for None) with covariance type
        ``covariance_type_``. ``ExactFlatClustering(model.energy_)`` gives
        the exact DPM posterior that BHC approximates: its
        ``log_evidence_`` is the quantity ``log_evidence_lower_bound_``
        bounds, its ``labels_`` the MAP partition. With
        ``hyperparameters="learn"`` the tree's concentration is ``alpha_``
        and its component prior's scale ``prior_scale_`` times this
        energy's.
    covariance_type_ : str
        The covariance type of the tree: the one ``"auto"`` chose, or the
        energy's.
    covariance_type_lower_bounds_ : dict
        ``"auto"``: ``log_evidence_lower_bound_`` of each candidate type;
        otherwise the given type's only.
    alpha_ : float
        The concentration used for the tree: the energy's ``alpha``, or the
        learned one.
    prior_scale_ : float
        The factor applied to the component prior's scale (1.0 unless
        ``hyperparameters="learn"``).
    hyperparameter_log_likelihoods_ : ndarray of shape (n_iter,)
        The evidence lower bound after each E step of the restart that was
        kept (one entry without learning).
    linkage_matrix_ : ndarray of shape (n_samples - 1, 4)
        The tree in scipy format, children first, heights non-decreasing. A
        node's height is the largest ``-log r`` in its subtree, capped at
        ``log 2`` for the nodes that the r_k < 0.5 cut keeps inside one
        cluster; so the merges above ``log 2`` are exactly the ones the cut
        undoes, and ``fcluster(linkage_matrix_, np.log(2), "distance")``
        gives the clusters of the cut.
    merge_log_probability_ : ndarray of shape (n_samples - 1,)
        log r_k of each row of ``linkage_matrix_``.
    children_ : ndarray of shape (n_samples - 1, 2)
        The merges of ``linkage_matrix_``, as in ``AgglomerativeClustering``.
    distances_ : ndarray of shape (n_samples - 1,)
        The heights of ``linkage_matrix_``.
    n_leaves_ : int
        Number of points.
    log_marginal_likelihood_ : float
        log p(D | T) at the root: the probability of the data under the
        DPM restricted to the partitions consistent with the tree, each
        weighted by its DPM prior renormalised over those partitions.
    log_evidence_lower_bound_ : float
        ``log p(D | T) + log d_T + log Gamma(alpha) - log Gamma(alpha + N)``,
        a lower bound on the DPM evidence log p(D) (Heller & Ghahramani
        2005, Corollary 1): the sum of P(partition) p(D | partition) over
        the tree-consistent partitions only, with the DPM prior
        P(partition) itself, not renormalised. p(D | T) alone is not a
        bound: it renormalises the prior over the tree-consistent
        partitions. Compare with ``log_evidence_`` of
        ``ExactFlatClustering(model.energy_)``.
    n_features_in_ : int
        Number of features of X.

    See Also
    --------
    sktrellis.ExactFlatClustering : The exact DPM posterior (evidence, MAP
        partition, co-clustering probabilities) of ``energy_``.

    Notes
    -----
    The greedy algorithm scores all N (N - 1) / 2 pairs once and each new
    cluster against the others, O(N**2) marginal likelihoods in vectorised
    batches, and keeps the pair scores in an N x N float64 matrix (32 MB
    for N = 2,000, fitted in a few seconds). ``algorithm="exact"`` tabulates
    the marginal likelihood of all 2**N subsets and needs about 32 bytes
    per subset.

    The greedy r_k criterion chains on Gaussian data whose clusters
    overlap. Merging T_i and T_j multiplies the DPM lower bound of the
    forest by 1 / (1 - r_k), so the greedy step is the merge that raises
    the bound most, and the largest gains are points joining an existing
    cluster (the DP prior odds of joining a cluster of n points are about
    n / alpha): one cluster absorbs points of a neighbouring cluster before
    that one has formed, and the tree never contains it. On
    ``make_blobs(200, centers=4, random_state=1)`` the greedy tree stops at
    2 clusters (ARI 0.33) while the 4 clusters of GaussianMixture score 52
    nats higher under the same prior. Ward's and average linkage grow all
    clusters at once; ``algorithm="sparse"`` lets the bound choose, at
    each cluster shared by the seed trees, which tree's split to keep,
    and gives 4 clusters there (ARI 0.87, a bound 51 nats higher). It
    leaves the model as it is: on ``make_blobs(200, centers=4,
    random_state=0)`` the default prior of ``"full"`` covariances scores
    3 clusters (ARI 0.61) above every 4-cluster partition found, as
    GaussianMixture with full covariances and BIC also picks 3 (ARI 0.65).
    Spherical clusters explain those blobs better (a bound 7.3 nats
    higher), and ``covariance_type="auto"`` keeps them: 4 clusters, ARI
    0.79, the ARI of assigning each point to its true centre.
    Binary data with the default data-dependent Beta prior gives the
    greedy tree's bound and purity (``benchmarks/README.md``).

    The component models are built by
    :meth:`~sktrellis.energies.DirichletProcessMixture.component_model`;
    the greedy loop is BHC's own rather than the engine's agglomerative
    search: it keeps stale best scores as upper bounds and rescans a row
    only when that bound comes first, which the engine's eager rescans do
    not, and BHC's merge state (d_k, p(D_k | T_k)) is not a split potential.

    References
    ----------
    K. A. Heller, Z. Ghahramani. Bayesian hierarchical clustering. ICML 2005.
    C. S. Greenberg, S. Macaluso, N. Monath, J.-A. Lee, P. Flaherty, K.
    Cranmer, A. McGregor, A. McCallum. Data structures & algorithms for
    exact inference in hierarchical clustering. AISTATS 2021.
    Z. Ghahramani, K. A. Heller. Bayesian sets. NIPS 2005.
    C. Fraley, A. E. Raftery. Bayesian regularization for normal mixture
    estimation and model-based clustering. Journal of Classification 2007.

    Examples
    --------
    >>> import numpy as np
    >>> from sktrellis.baselines import BayesianHierarchicalClustering
    >>> from sktrellis import ExactFlatClustering
    >>> from sktrellis.energies import DirichletProcessMixture
    >>> X = np.array([[0.0, 0.1], [0.2, 0.0], [0.1, 0.2],
    ...               [5.0, 5.1], [5.2, 4.9], [4.9, 5.0]])
    >>> dpm = DirichletProcessMixture(covariance_prior=0.05, mean_precision_prior=0.01)
    >>> bhc = BayesianHierarchicalClustering(dpm).fit(X)
    >>> bhc.labels_.tolist()
    [0, 0, 0, 1, 1, 1]
    >>> bhc.covariance_type_, round(bhc.covariance_type_lower_bounds_["full"], 2)
    ('spherical', -14.66)
    >>> round(bhc.log_evidence_lower_bound_, 2)
    -14.62
    >>> bhc.energy_
    DirichletProcessMixture(covariance_prior=0.05, covariance_type='spherical',
                            mean_precision_prior=0.01)
    >>> exact = ExactFlatClustering(bhc.energy_).fit(X)
    >>> round(exact.log_evidence_, 2)
    -14.62
    """

    _parameter_constraints = {
        "energy": [DirichletProcessMixture, None],
        "covariance_type": [StrOptions({"auto"}), None],
        "n_clusters": [Interval(Integral, 1, None, closed="left"), None],
        "algorithm": [StrOptions({"sparse", "greedy", "exact"})],
        "hyperparameters": [StrOptions({"fixed", "learn"})],
        "verbose": ["verbose"],
        "n_jobs": [Integral, None],
    }

    def __init__(self, energy=None, *, covariance_type="auto", n_clusters=None,
                 algorithm="sparse", hyperparameters="fixed", verbose=0, n_jobs=None):
        self.energy = energy
        self.covariance_type = covariance_type
        self.n_clusters = n_clusters
        self.algorithm = algorithm
        self.hyperparameters = hyperparameters
        self.verbose = verbose
        self.n_jobs = n_jobs

    _default_energy = DirichletProcessMixture

    def _energy_of(self, covariance_type):
        """A clone of the energy with this covariance type."""
        return with_covariance_type(self._energy(), covariance_type)

    def _fit_bytes(self, X, covariance_type):
        """Peak bytes of a greedy or sparse fit: statistics rows of every node and block.

        The node tables of the runs kept (one, five more when learning the
        hyperparameters) and the one being built, the sparse trellis's
        vertices (the points and at most N - 1 new clusters per seed tree),
        and a block of scored pairs. The exact algorithm has its own.
        """
        n_points, n_features = X.shape
        width = statistics_width(self._energy().component, covariance_type, n_features)
        tables = 2 + (5 if self.hyperparameters == "learn" else 0)
        vertices = 0 if self.algorithm == "greedy" else n_points + (
            1 + len(_SEED_LINKAGES)) * (n_points - 1)
        pairs = min(_block_rows(width), n_points * (n_points - 1) // 2)
        rows = tables * (2 * n_points - 1) + vertices + _ROWS_PER_SCORED_PAIR * pairs
        return 8 * width * rows

    def _build_tree(self, X, component, alpha):
        """The tree for these hyperparameters, as a filled _NodeTable and its merges."""
        n_points = X.shape[0]
        forest = _NodeTable(component, X, float(np.log(alpha)))
        if self.algorithm == "exact":
            merges = self._exact_merges(component, X, alpha)
        else:
            merges = greedy_merges(forest, n_points)
            # Below three points every tree is the greedy one.
            if self.algorithm == "greedy" or n_points < 3:
                return forest, merges
            # Linkage trees do not change when X is divided by a power of
            # two (exact), and at unit scale its squared distances cannot
            # overflow (features up to 1e308 are valid input).
            unit_X = np.ldexp(X, -unit_exponent(X))
            seeds = [merges] + [
                linkage(unit_X, method)[:, :2].astype(np.int64) for method in _SEED_LINKAGES
            ]
            merges = best_spanned_merges(component, X, forest.log_alpha, seeds)
            forest = _NodeTable(component, X, forest.log_alpha)
        for k, (a, b) in enumerate(merges):
            forest.merge(n_points + k, a, b)
        return forest, merges

    @clears_fit_state_on_failure
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Build the tree, its BHC quantities and the flat cut.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Data; 0/1 only for the energy's ``component="bernoulli"``.
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
        energy._validate_params()   # a bad prior is named before any memory is estimated
        types = covariance_types(energy, self.covariance_type,
                                 lambda covariance_type: self._fit_bytes(X, covariance_type))
        if self.algorithm == "exact":
            types = exact_types_that_fit(self._energy_of, X, types)
        else:
            for covariance_type in types:
                check_memory(
                    n_points, self._fit_bytes(X, covariance_type), type(self).__name__,
                    holds=(f'covariance_type="{covariance_type}" statistics of n_features='
                           f"{X.shape[1]} for every node of the tree"),
                    way_out=('use covariance_type="diag" (2 n_features statistics a node '
                             'instead of n_features**2) or fewer features'),
                )
        fits = {}
        for covariance_type in types:
            component = self._energy_of(covariance_type).component_model(X)
            fits[covariance_type] = fit_hyperparameters(
                self._build_tree, X, component, float(energy.alpha),
                self.hyperparameters == "learn",
            )
        self.covariance_type_lower_bounds_ = {name: fit[0] for name, fit in fits.items()}
        # The largest bound; the earliest candidate among equals.
        self.covariance_type_ = max(fits, key=lambda name: fits[name][0])
        self.energy_ = self._energy_of(self.covariance_type_)
        _, alpha, scale, forest, merges, history = fits[self.covariance_type_]
        self.alpha_, self.prior_scale_ = float(alpha), float(scale)
        self.hyperparameter_log_likelihoods_ = np.array(history)
        root = 2 * n_points - 2
        self.log_marginal_likelihood_ = float(forest.log_tree[root])
        self.log_evidence_lower_bound_ = lower_bound(forest, alpha)
        log_r = forest.log_r[n_points:]
        split = cut(merges, log_r)
        linkage, order = linkage_from_heights(merges, heights(merges, log_r, split))
        self.merge_log_probability_ = log_r[order]
        n_clusters = int(split.sum()) + 1 if self.n_clusters is None else self.n_clusters
        self._set_tree(linkage, n_clusters)
        self.n_clusters_ = n_clusters
        self._store_predictive(forest, merges)
        return self

    def _store_predictive(self, forest, merges):
        """Per-node statistics and log weights of the predictive distribution.

        log w_k = log r_k + sum over the strict ancestors i of log(1 - r_i)
        + log(n_k / (N + alpha)): the probability that node k is a cluster of
        the tree-consistent partition, times the DPM's weight of joining it.
        """
        n_points = len(merges) + 1
        n_nodes = 2 * n_points - 1
        with np.errstate(divide="ignore"):
            log_not_r = np.log1p(-np.exp(np.minimum(forest.log_r, 0.0)))
        log_path = np.zeros(n_nodes)        # sum of log(1 - r_i) over strict ancestors
        for k in range(len(merges) - 1, -1, -1):
            node = n_points + k
            for child in merges[k]:
                log_path[child] = log_path[node] + log_not_r[node]
        log_scale = np.log(n_points + self.alpha_)
        self._node_statistics = forest.statistics
        self._node_log_marginal = forest.log_marginal
        self._node_log_weight = forest.log_r + log_path + np.log(forest.size) - log_scale
        self._new_cluster_log_weight = np.log(self.alpha_) - log_scale
        self._component = forest.component
        # The flat cluster of each node, -1 above the cut (several clusters).
        node_label = np.full(n_nodes, -1)
        node_label[:n_points] = self.labels_
        for k, (a, b) in enumerate(merges):
            if node_label[a] == node_label[b]:
                node_label[n_points + k] = node_label[a]
        self._node_label = node_label

    def _node_log_densities(self, X):
        """log w_k + log p(x | D_k) of every new point and node, and the new-cluster term."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        component = self._component
        new = component.statistics(X)
        n_nodes = len(self._node_statistics)
        out = np.empty((len(X), n_nodes))
        step = max(1, _PREDICT_BLOCK // max(n_nodes, 1))
        for first in range(0, len(X), step):
            block = new[first : first + step]
            joint = (block[:, None, :] + self._node_statistics[None, :, :]).reshape(
                -1, new.shape[1]
            )
            after = component.log_marginal(joint).reshape(len(block), n_nodes)
            out[first : first + len(block)] = after - self._node_log_marginal
        out += self._node_log_weight
        prior_predictive = component.log_marginal(new) + self._new_cluster_log_weight
        return out, prior_predictive

    def score_samples(self, X):
        """Log predictive density log p(x | D, T) of new points.

        Heller & Ghahramani's predictive distribution (section "Learning and
        prediction"): a sum over the nodes k of the tree of p(x | D_k),
        weighted by ``r_k prod_{ancestors i} (1 - r_i)``, the probability that
        node k is a cluster of the tree-consistent partition. Here each node
        is also weighted by ``n_k / (N + alpha)`` and the new-cluster term
        ``alpha / (N + alpha) p(x)`` is added: the DPM's posterior predictive
        averaged over the tree-consistent partitions, which integrates to one
        (the paper's weights alone sum to the expected number of clusters).
        With every partition consistent with the tree (N <= 2) it is the
        exact DPM posterior predictive.

        Parameters
        ----------
        X : array-like of shape (n_new, n_features)
            New points, with the features of the fitted data.

        Returns
        -------
        log_density : ndarray of shape (n_new,)
            The log predictive density of each new point.

        Examples
        --------
        >>> import numpy as np
        >>> from sktrellis.baselines import BayesianHierarchicalClustering
        >>> rng = np.random.default_rng(0)
        >>> X = np.r_[rng.normal(0, 0.3, (8, 1)), rng.normal(5, 0.3, (8, 1))]
        >>> model = BayesianHierarchicalClustering().fit(X)
        >>> bool(model.score_samples([[0.05]])[0] > model.score_samples([[2.5]])[0])
        True
        """
        log_nodes, log_new = self._node_log_densities(X)
        return np.logaddexp(logsumexp(log_nodes, axis=1), log_new)

    def predict_proba(self, X):
        """Probability that each new point belongs to each cluster of ``labels_``.

        The predictive mass of the nodes inside each flat cluster of the cut
        tree (the cluster's subtree), normalised over the clusters; nodes
        above the cut hold several clusters and a new cluster would hold
        none, so neither takes part.

        Parameters
        ----------
        X : array-like of shape (n_new, n_features)
            New points, with the features of the fitted data.

        Returns
        -------
        probabilities : ndarray of shape (n_new, ``n_clusters_``)
            Each row sums to one over the clusters of ``labels_``.

        Examples
        --------
        >>> import numpy as np
        >>> from sktrellis.baselines import BayesianHierarchicalClustering
        >>> rng = np.random.default_rng(0)
        >>> X = np.r_[rng.normal(0, 0.3, (8, 1)), rng.normal(5, 0.3, (8, 1))]
        >>> model = BayesianHierarchicalClustering().fit(X)
        >>> model.labels_.tolist()
        [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1]
        >>> model.predict_proba([[0.05], [2.5], [5.1]]).round(2).tolist()
        [[1.0, 0.0], [0.26, 0.74], [0.0, 1.0]]
        """
        log_nodes, _ = self._node_log_densities(X)
        log_cluster = np.full((len(log_nodes), self.n_clusters_), -np.inf)
        for label in range(self.n_clusters_):
            inside = self._node_label == label
            log_cluster[:, label] = logsumexp(log_nodes[:, inside], axis=1)
        return np.exp(log_cluster - logsumexp(log_cluster, axis=1, keepdims=True))

    def predict(self, X):
        """The most probable cluster of ``labels_`` for each new point.

        Parameters
        ----------
        X : array-like of shape (n_new, n_features)
            New points, with the features of the fitted data.

        Returns
        -------
        labels : ndarray of shape (n_new,)
            The cluster of ``labels_`` of largest ``predict_proba``.

        Examples
        --------
        >>> import numpy as np
        >>> from sktrellis.baselines import BayesianHierarchicalClustering
        >>> rng = np.random.default_rng(0)
        >>> X = np.r_[rng.normal(0, 0.3, (8, 1)), rng.normal(5, 0.3, (8, 1))]
        >>> BayesianHierarchicalClustering().fit(X).predict([[4.9], [-0.3]]).tolist()
        [1, 0]
        """
        return np.argmax(self.predict_proba(X), axis=1)

    def _exact_merges(self, component, X, alpha):
        """Children-first merges of the tree of largest d_T p(D | T), by the trellis."""
        # The DPM's cluster potential log a(C) = log alpha + log Gamma(|C|) + log p(D_C).
        table = component.subset_log_marginals(X)
        sizes = np.bitwise_count(np.arange(len(table), dtype=np.uint32))
        table[1:] += np.log(alpha) + gammaln(sizes[1:].astype(np.float64))
        _, parents, lefts = best_bhc_tree(
            table, effective_n_threads(self.n_jobs), self.verbose, type(self).__name__,
        )
        return merges_from_splits(parents, lefts)

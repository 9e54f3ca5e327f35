"""What every sktrellis estimator shares, in one place.

``TreeEstimatorMixin``: validation of the training data, the ``n_clusters``
check and the fitted attributes of a tree. ``EnergyEstimatorMixin`` adds the
energy parameter (default, "pass an instance") and the pairwise tag.
``ClusterPosteriorMixin``: the cluster queries of an estimator holding an
exact posterior (``self._trellis``, read through
:class:`sktrellis._engine.posterior.TreePosterior`);
``TreePosteriorMixin`` exposes it as ``posterior_``.
"""
import functools
from numbers import Integral

import numpy as np
from sklearn.exceptions import NotFittedError
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, validate_params
from sklearn.utils.validation import check_is_fitted, validate_data

from ._engine.tree.conversion import labels_from_linkage, linkage_from_merges, merges_from_tree
from ._calibration import _warn_caller, fixed_energy
from ._validation import check_members, data_sketch
from ._tree import Tree


def clears_fit_state_on_failure(fit):
    """Decorate ``fit`` so that the fitted state changes in one step, or not at all on failure.

    ``fit`` runs on a private working copy of the estimator (its parameters,
    no fitted attributes); when it returns, the copy's attributes replace
    the estimator's in one assignment of ``__dict__``. So a fit never leaves
    one dataset's attributes (``n_features_in_``, the data sketch the
    scorers compare) beside another's posterior: not when it raises (a
    refused size, an energy error, Ctrl-C: the estimator is then left
    unfitted, in one assignment too), and not when two threads fit the
    same object at once (each reader sees one whole fit, the last to
    finish). Fitting one estimator object from several threads at once is
    still not supported -- it wastes all but one fit; clone it per thread
    (``sklearn.base.clone``, or ``fit_many``). A fitted estimator answers
    queries from any thread.
    """

    @functools.wraps(fit)
    def fit_or_clear(self, *args, **kwargs):
        work = object.__new__(type(self))
        work.__dict__.update(_without_fit_state(self))
        try:
            fit(work, *args, **kwargs)
        except BaseException:
            self.__dict__ = _without_fit_state(self)
            raise
        # The fitted attributes of the copy, the rest as it is now (what
        # scikit-learn's callbacks attach to the estimator during a fit).
        self.__dict__ = {**work.__dict__, **_without_fit_state(self)}
        return self

    return fit_or_clear


# What scikit-learn keeps on an estimator besides its parameters: its
# configuration and the callbacks a meta-estimator attaches around a fit.
_SKLEARN_PRIVATE = ("__", "_skl", "_metadata_request", "_parent_callback_ctx",
                    "_callback_fit_ctx")


def _is_fit_state(name):
    """Whether an attribute is set by ``fit``: public ``name_`` and private ``_name``.

    Constructor parameters (no underscore at either end) and scikit-learn's
    own attributes (``_sklearn_*``, ``_skl_callbacks``, ``_metadata_request``
    and the callback contexts) are not.
    """
    if name.startswith(_SKLEARN_PRIVATE):
        return False
    return name.endswith("_") or name.startswith("_")


def _without_fit_state(estimator):
    """A copy of the estimator's attributes without what ``fit`` sets."""
    return {name: value for name, value in vars(estimator).items() if not _is_fit_state(name)}


#: Below this share of the full posterior's mass (in log), a sparse fit's
#: probabilities need not resemble the full posterior's, so the fit says so.
LOG_SHARE_WORTH_A_WARNING = float(np.log(0.5))


def warn_if_spanned_share_small(estimator, log_share_bound, structures):
    """Warn that a sparse fit's probabilities are relative to what it spans, when that is little.

    A sparse trellis reports P(. | X, the structure is spanned). When no
    bound certifies that the spanned structures hold at least half of the
    full posterior's mass, those numbers can be far from the full
    posterior's (on a 20-particle Ginkgo jet the spanned trees held e^-11
    of the mass and their top clusters got 0.33-0.81, where the exact
    posterior gives the same clusters 0.000-0.046), and nothing else in
    the result would say so.

    Parameters
    ----------
    estimator : BaseEstimator
        The fitted sparse estimator (named in the message).
    log_share_bound : float
        ``log_spanned_mass_lower_bound_``, NaN when unknown.
    structures : str
        What the trellis spans ("trees" or "partitions").
    """
    if log_share_bound >= LOG_SHARE_WORTH_A_WARNING:
        return
    share = ("is unknown (no bound applies)" if np.isnan(log_share_bound)
             else f"is at least e^{log_share_bound:.4g}, and may be that small")
    _warn_caller(
        f"{type(estimator).__name__}: the share of the full posterior's mass that the "
        f"spanned {structures} hold {share} (log_spanned_mass_lower_bound_); every "
        f"probability this fit reports is relative to the spanned {structures}, "
        f"P(. | X, spanned), and can be far from the full posterior's. The exact "
        f"estimators give the full posterior where memory allows")


def check_built_for(model, n_points, energy, method):
    """A ValueError if what ``energy.method(X)`` built does not cover the n_points rows of X.

    A TypeError naming the method if it returned no such model at all (None).

    A potential or merge model over fewer (or more) points would be fitted
    silently: labels for the wrong number of samples, or tables read past
    their end.
    """
    built = getattr(model, "n_points", None)
    if built is None:
        expected = {"split_potential": "a SplitPotential (sktrellis.energies.SplitPotential)",
                    "merge_model": "a MergeModel"}.get(method, "the model over the points")
        raise TypeError(
            f"{type(energy).__name__}.{method}(X) returned {type(model).__name__} "
            f"{model!r:.80}; it must return {expected} over the n_samples={n_points} rows of X"
        )
    if built != n_points:
        raise ValueError(
            f"{type(energy).__name__}.{method}(X) returned a {type(model).__name__} over "
            f"n_points={built} points for X of n_samples={n_points}; an energy must build "
            "it over every row of the X it is given"
        )
    return model


class TreeEstimatorMixin:
    """An estimator that fits a tree: its training data checks and fitted tree attributes."""

    def _validate_training_data(self, X, *, ensure_min_samples=2):
        """X as finite float64 (validate_data), its sketch for the scorers, n_clusters checked."""
        X = validate_data(self, X, ensure_min_samples=ensure_min_samples, dtype=np.float64)
        self._fit_sketch = data_sketch(X)
        n_clusters = getattr(self, "n_clusters", None)
        if n_clusters is not None and n_clusters > len(X):
            raise ValueError(f"n_clusters={n_clusters} must be at most n_samples={len(X)}")
        return X

    def _set_tree_from_merges(self, merges, log_potentials, energy):
        """The fitted attributes of a searched tree given as merges with their log psi."""
        n_points = len(merges) + 1
        if not np.all(np.isfinite(log_potentials)):
            remedy = "a larger beam_width or " if hasattr(self, "beam_width") else ""
            raise ValueError(
                f"{type(self).__name__} found only trees of zero potential for these "
                f"n_samples={n_points} points under {energy!r}: some merge was forbidden "
                f"(log psi = -inf) whichever pair it took; use {remedy}"
                "SparseTrellisClustering"
            )
        self._set_tree(linkage_from_merges(merges, log_potentials), self.n_clusters)
        self.map_log_potential_ = float(np.sum(log_potentials))

    def _set_tree(self, linkage, n_clusters):
        """The fitted attributes of a tree given as a scipy linkage matrix."""
        self.linkage_matrix_ = linkage
        self.children_ = linkage[:, :2].astype(np.intp)
        self.distances_ = linkage[:, 2].copy()
        self.n_leaves_ = len(linkage) + 1
        self.labels_ = labels_from_linkage(linkage, n_clusters)
        self.tree_ = Tree(linkage)


class EnergyEstimatorMixin(TreeEstimatorMixin):
    """A tree estimator with an ``energy`` parameter and, usually, ``n_clusters``.

    Subclasses set ``_default_energy``, a callable returning the energy used
    when ``energy=None``. Setting a parameter of the energy
    (``set_params(energy__beta=2.0)``, as ``GridSearchCV`` does) while
    ``energy=None`` sets it on that default energy, which then becomes the
    ``energy`` parameter.
    """

    def set_params(self, **params):
        """Set the parameters of this estimator, and of its energy (``energy__name``).

        With ``energy=None``, an ``energy__name`` parameter applies to the
        default energy, which becomes the ``energy`` parameter.

        Parameters
        ----------
        **params : dict
            Estimator parameters, and energy parameters as ``energy__name``.

        Returns
        -------
        self : estimator instance
            Estimator instance.
        """
        if (getattr(self, "energy", None) is None and "energy" not in params
                and any(key.startswith("energy__") for key in params)):
            self.energy = type(self)._default_energy()
        return super().set_params(**params)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        energy = getattr(self, "energy", None)
        tags.input_tags.pairwise = getattr(energy, "affinity", None) == "precomputed"
        return tags

    def _energy(self):
        """The energy to fit with: the parameter, or the default for None."""
        if isinstance(self.energy, type):
            name = self.energy.__name__
            raise TypeError(
                f"energy={name} is a class; pass an instance, e.g. energy={name}()"
            )
        return type(self)._default_energy() if self.energy is None else self.energy

    def _uncalibrated_energy(self):
        """The energy of an estimator that computes no posterior over all trees.

        Such an estimator (greedy, beam search, best-first)
        has nothing to calibrate a temperature against: ``beta="auto"``
        means 1 here. Sets ``beta_`` for an energy with a temperature.
        """
        energy, beta = fixed_energy(self._energy())
        if beta is not None:
            self.beta_ = beta
        return energy


class ClusterPosteriorMixin:
    """Cluster queries of an estimator whose ``_trellis`` holds an exact posterior."""

    def _fitted_posterior(self):
        """The fitted trellis, or a NotFittedError saying why it is gone and how to get it back."""
        check_is_fitted(self)
        if self._trellis is None:
            raise NotFittedError(
                f"this {type(self).__name__}'s posterior tables were dropped by "
                "drop_posterior(); the fitted tree and summaries remain, but posterior "
                "queries need the tables: fit the estimator again to get them back"
            )
        return self._trellis

    def drop_posterior(self):
        """Free the posterior tables, keeping the fitted tree and summaries.

        An exact fit keeps its trellis tables -- tens of bytes per subset,
        2**N subsets: about 50 MB at N = 20 and 1.6 GB at N = 25 -- so that
        posterior queries are fast, and pickling the estimator stores them
        all. After ``drop_posterior()`` the estimator pickles to the size of
        its fitted attributes (``labels_``, the MAP tree, ``log_partition_``
        and the other summaries, which all stay), and posterior queries
        (cluster probabilities, samples, ``posterior_``, ``log_probability``)
        raise :class:`~sklearn.exceptions.NotFittedError`; fit again to get
        them back.

        Returns
        -------
        self : object
            The estimator, without its posterior tables.

        Examples
        --------
        >>> import pickle
        >>> import numpy as np
        >>> from sktrellis import ExactHierarchicalClustering
        >>> X = np.random.default_rng(0).normal(size=(12, 2))
        >>> model = ExactHierarchicalClustering().fit(X)
        >>> full = len(pickle.dumps(model))
        >>> small = len(pickle.dumps(model.drop_posterior()))
        >>> bool(small < full / 10), model.labels_.shape
        (True, (12,))
        """
        check_is_fitted(self)
        self._trellis = None
        return self

    def cluster_probability(self, members):
        """Posterior probability that ``members`` form a cluster.

        Exact, under the estimator's posterior (see its class docstring for
        over which trees or partitions). The first query may run the
        outside pass, which gives every cluster's probability at once; later
        queries are O(1).

        Parameters
        ----------
        members : array-like of int, or array-like of bool of shape (n_samples,)
            The points of the cluster: their indices, or a mask.

        Returns
        -------
        probability : float
            P(the points ``members`` form a cluster | X), in [0, 1].
        """
        check_is_fitted(self)
        members = check_members(members, len(self.labels_))
        return float(np.exp(min(self._fitted_posterior().cluster_log_marginal(members), 0.0)))

    @validate_params(
        {
            "n_top": [Interval(Integral, 1, None, closed="left")],
            "min_size": [Interval(Integral, 1, None, closed="left")],
        },
        prefer_skip_nested_validation=True,
    )
    def most_probable_clusters(self, n_top=10, *, min_size=2):
        """The clusters of highest posterior probability.

        Certain clusters (the whole set of a tree, which is always its root)
        are left out.

        Parameters
        ----------
        n_top : int, default=10
            How many clusters to return, at least 1.
        min_size : int, default=2
            Smallest cluster size considered, at least 1 (singletons are
            certain clusters of a tree).

        Returns
        -------
        clusters : list of (ndarray of int, float)
            Members and probability, most probable first (ties: smaller
            clusters first).
        """
        members, log_marginals = self._fitted_posterior().most_probable_clusters(n_top, min_size)
        return [(m, float(np.exp(min(v, 0.0)))) for m, v in zip(members, log_marginals)]


class TreePosteriorMixin(ClusterPosteriorMixin):
    """Cluster queries of a posterior over trees, plus the support of a tree's nodes."""

    @property
    def posterior_(self):
        """The fitted exact posterior over trees, a :class:`~sktrellis.TreePosterior`.

        What metrics and plots read (e.g. ``expected_dendrogram_purity``):
        cluster marginals, per-cluster sums and the split probabilities,
        exact over the trees the estimator's posterior covers.
        """
        return self._fitted_posterior()

    def clade_support(self, tree=None):
        """Posterior probability of every cluster of a tree, aligned with its rows.

        What pvclust estimates from bootstrap re-clusterings, but exact: for
        row k of the linkage matrix (or ``children_`` array), the posterior
        probability that the leaves under that merge form a cluster. Any
        tree over the fitted points works: the MAP tree (default), a scipy
        linkage of the same data, a greedy tree.

        Parameters
        ----------
        tree : ndarray of shape (n_samples - 1, 4) or (n_samples - 1, 2), default=None
            A scipy linkage matrix or ``children_`` array; None means
            ``linkage_matrix_``.

        Returns
        -------
        support : ndarray of shape (n_samples - 1,)
            The last row (the root) has support 1.

        Examples
        --------
        >>> import numpy as np
        >>> from sktrellis import ExactHierarchicalClustering
        >>> X = np.array([[0.0], [0.2], [3.0], [3.1], [3.5]])
        >>> model = ExactHierarchicalClustering().fit(X)
        >>> model.clade_support().round(2).tolist()
        [1.0, 0.38, 1.0, 1.0]
        """
        check_is_fitted(self)
        linkage = self.linkage_matrix_ if tree is None else tree
        merges = merges_from_tree(linkage, self.n_leaves_)
        members = Tree.from_children(merges).clusters()
        return np.array([self.cluster_probability(m) for m in members])

    def supported_clades(self, level=0.95, *, tree=None, max_only=True):
        """The clades of a tree whose posterior support is at least ``level``.

        pvclust's ``pvpick``, with exact supports: the inner nodes of the
        tree (the MAP tree by default) whose leaves form a cluster with
        posterior probability at least ``level``, the root left out (it is
        certain). ``plot_dendrogram(..., highlight=level)`` boxes them.

        Parameters
        ----------
        level : float in (0, 1], default=0.95
            Smallest support of a clade returned.
        tree : ndarray of shape (n_samples - 1, 4) or (n_samples - 1, 2), default=None
            A scipy linkage matrix or ``children_`` array over the fitted
            points; None means ``linkage_matrix_``.
        max_only : bool, default=True
            Return only the largest such clades, none inside another
            (pvpick's ``max.only``); False returns every one.

        Returns
        -------
        clades : list of (ndarray of int, float)
            Members (increasing) and support, in the order of the tree's rows.

        Examples
        --------
        >>> import numpy as np
        >>> from sktrellis import ExactHierarchicalClustering
        >>> X = np.array([[0.0], [0.2], [3.0], [3.1], [3.5]])
        >>> model = ExactHierarchicalClustering().fit(X)
        >>> [(m.tolist(), round(p, 2)) for m, p in model.supported_clades(0.7)]
        [([0, 1], 1.0), ([2, 3, 4], 1.0)]
        """
        if not 0 < level <= 1:
            raise ValueError(f"level must be a support in (0, 1], got {level!r}")
        support = self.clade_support(tree)
        merges = merges_from_tree(self.linkage_matrix_ if tree is None else tree,
                                  self.n_leaves_)
        members = Tree.from_children(merges).clusters()
        chosen = [row for row in range(len(merges) - 1) if support[row] >= level]
        if max_only:
            sets = {row: set(members[row].tolist()) for row in chosen}
            chosen = [row for row in chosen
                      if not any(sets[row] < sets[other] for other in chosen)]
        return [(members[row], float(support[row])) for row in chosen]

    def log_probability(self, tree, members=None):
        """Natural log of P(tree | X), or of a sub-hierarchy's marginal with ``members``.

        Without ``members``: the posterior probability of a tree over all
        the fitted points. With ``members``: ``tree`` is a tree over those
        points only (leaf i is point ``members[i]``) and the result is the
        marginal probability of that sub-hierarchy (Greenberg et al. 2021,
        section 2.4): the summed probability of every tree in which
        ``members`` form a cluster whose subtree is ``tree``, whatever the
        rest of the tree, ``O(S) phi(tree) / Z`` -- equal to
        ``cluster_probability(members)`` times the probability of ``tree``
        given that cluster. The first query with ``members`` may run the
        outside pass, as ``cluster_probability`` does.

        Parameters
        ----------
        tree : ndarray of shape (n_leaves - 1, 4) or (n_leaves - 1, 2)
            A scipy linkage matrix or an ``AgglomerativeClustering``-style
            ``children_`` array over the ``n_leaves`` fitted points, or
            over ``len(members)`` points with ``members``.
        members : array-like of int, or array-like of bool of shape (n_samples,), default=None
            The points of the sub-hierarchy: indices (leaf i of ``tree`` is
            point ``members[i]``) or a mask (leaves in increasing point
            order). None means all points, in order.

        Returns
        -------
        log_probability : float
            ``-inf`` for a tree with a forbidden split or outside the
            posterior's support.

        Examples
        --------
        >>> import numpy as np
        >>> from sktrellis import ExactHierarchicalClustering
        >>> X = np.array([[0.0], [0.2], [3.0], [3.1], [3.5]])
        >>> model = ExactHierarchicalClustering().fit(X)
        >>> # {2, 3, 4} a cluster with {3, 4} merged first, as scipy children
        >>> sub = model.log_probability([[1, 2], [0, 3]], members=[2, 3, 4])
        >>> bool(np.exp(sub) <= model.cluster_probability([2, 3, 4]))
        True
        """
        posterior = self._fitted_posterior()
        n_points = posterior.n_points
        if members is None:
            members = np.arange(n_points)
        else:
            members = check_members(members, n_points)
            shape = np.shape(tree)
            if len(shape) != 2 or shape[0] != len(members) - 1:
                k = len(members)
                raise ValueError(
                    f"with members, tree must be a tree over the {k} points of members (leaf "
                    f"i is point members[i]): a linkage matrix of shape ({k - 1}, 4) or a "
                    f"children_ array of shape ({k - 1}, 2); got shape {shape}"
                )
        merges = merges_from_tree(tree, len(members))
        return posterior.subtree_log_probability(members, merges)

    @validate_params(
        {"n_samples": [Interval(Integral, 1, None, closed="left")],
         "random_state": ["random_state"]},
        prefer_skip_nested_validation=True,
    )
    def sample(self, n_samples=1, random_state=None):
        """Draw trees exactly from the posterior (see the class for over which trees).

        Parameters
        ----------
        n_samples : int, default=1
            Number of trees.
        random_state : int, RandomState instance or None, default=None
            Seed; None uses the estimator's ``random_state``.

        Returns
        -------
        trees : list of ndarray of shape (n_leaves - 1, 4)
            The sampled trees as scipy linkage matrices, heights as for
            ``linkage_matrix_``.
        """
        posterior = self._fitted_posterior()
        rng = check_random_state(self.random_state if random_state is None else random_state)
        return posterior.sample_linkages(n_samples, rng)

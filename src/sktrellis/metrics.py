"""Scores of hierarchical clusterings, and scorers for model selection.

Trees are given as a scipy linkage matrix of shape (n - 1, 4) or a
scikit-learn ``children_`` array of shape (n - 1, 2): row r merges two nodes
(leaves 0..n-1 or earlier merges n + r') into node n + r.

The scorers make these scores usable as ``GridSearchCV(scoring=...)`` for
*transductive* clusterers, which cluster the data they are fitted on and
cannot score other data. Grid search then fits and scores every candidate on
the same points: pass ``cv=TransductiveSplit()`` (one "split" whose
training and test sets are both the full dataset, the same as
``cv=[(idx, idx)]`` with ``idx = np.arange(n_samples)``)::

    search = GridSearchCV(
        make_pipeline(StandardScaler(), ExactHierarchicalClustering(Dasgupta())),
        {"exacthierarchicalclustering__energy__gamma": [0.1, 1.0, 10.0]},
        scoring=make_tree_scorer(dendrogram_purity),
        cv=TransductiveSplit(),
    ).fit(X, y)

A splitting ``cv`` (the default 5 folds, ``KFold``, ...) scores a clusterer
on points it was not fitted on: the scorers refuse it with an error naming
``TransductiveSplit``.

Every candidate is a new fit, and an energy at its default ``beta="auto"``
calibrates its temperature in every fit by a bootstrap, about 100 times the
cost of a small fit with beta fixed (14 x 20: 0.64 s against 0.006 s of CPU,
``benchmarks/bench_beta_cost.py``). When the parameter searched is not the
temperature, calibrate once and search with it fixed, e.g.
``Dasgupta(beta=ExactHierarchicalClustering().fit(X).beta_)``; the
calibration then answers for the energy it was made with (the default
``gamma``), not for each candidate.
"""
import numpy as np
from sklearn.model_selection import BaseCrossValidator
from sklearn.pipeline import Pipeline
from sklearn.utils.validation import check_is_fitted

from ._engine.posterior import TreePosterior
from ._engine.tree.conversion import merges_from_tree
from ._utils import final_step
from ._validation import check_square_matrix, data_sketch

__all__ = [
    "TransductiveSplit",
    "dasgupta_cost",
    "dendrogram_purity",
    "expected_dendrogram_purity",
    "log_partition_scorer",
    "make_posterior_scorer",
    "make_tree_scorer",
]

# Splits handled per NumPy block in expected_dendrogram_purity: large enough
# to amortise the Python overhead, small enough to keep the temporary arrays
# at a few MiB whatever the number of points.
_SPLITS_PER_BLOCK = 1 << 18


###############################################################################
# Tree layout: leaf order, node intervals, lowest common ancestors


def _check_labels(labels_true):
    labels = np.asarray(labels_true)
    if labels.ndim != 1:
        raise ValueError(f"labels_true must be 1-dimensional, got shape {labels.shape}")
    if labels.size == 0:
        raise ValueError("labels_true is empty: dendrogram purity needs at least one point")
    if labels.dtype.kind in "fc" and not np.all(np.isfinite(labels)):
        raise ValueError(
            "labels_true contains NaN or infinity; every point needs a class label"
        )
    return labels


def _check_tree(tree, n_points, source):
    """Validated merges of a tree over n_points, where ``source`` fixed n_points."""
    tree = np.asarray(tree)
    if tree.ndim != 2 or tree.shape[1] not in (2, 4):
        raise ValueError(
            "tree must be a linkage matrix of shape (n_samples - 1, 4) or a children_ "
            f"array of shape (n_samples - 1, 2); got shape {tree.shape}"
        )
    if tree.shape[0] != n_points - 1:
        raise ValueError(
            f"{source} has n_samples={n_points} but the tree has {tree.shape[0]} rows, "
            f"that is {tree.shape[0] + 1} leaves; a tree over n_samples points has "
            "n_samples - 1 rows"
        )
    if n_points == 1:
        return np.zeros((0, 2), dtype=np.int64)
    return merges_from_tree(tree, n_points)


class _TreeLayout:
    """Leaf-order intervals of every node of a tree, and LCA queries.

    Leaves are laid out in the order a dendrogram draws them (first child of
    each merge on the left). Node v then covers the leaf positions
    ``start[v] .. start[v] + size[v] - 1``, and each of the n - 1 gaps
    between neighbouring positions lies under exactly one merge: the one whose
    first child ends there. The lowest common ancestor of the leaves at
    positions p < q is the highest merge over the gaps p .. q - 1, and since
    rows are children-first that is the merge of largest row index: a range
    maximum, answered in O(1) from a sparse table built in O(n log n).
    """

    def __init__(self, merges, n_points):
        self.n_points = n_points
        firsts, seconds = merges[:, 0].tolist(), merges[:, 1].tolist()
        # Sizes bottom-up, starts top-down: rows are children-first and the
        # root is the last row. Plain lists keep these two O(n) loops fast.
        size = [1] * n_points + [0] * (n_points - 1)
        for row in range(n_points - 1):
            size[n_points + row] = size[firsts[row]] + size[seconds[row]]
        start = [0] * (2 * n_points - 1)
        for row in range(n_points - 2, -1, -1):
            first, node_start = firsts[row], start[n_points + row]
            start[first] = node_start
            start[seconds[row]] = node_start + size[first]
        self.size = np.array(size, dtype=np.int64)
        self.start = np.array(start, dtype=np.int64)
        gap_row = np.empty(n_points - 1, dtype=np.int64)
        gap_row[self.start[merges[:, 1]] - 1] = np.arange(n_points - 1)
        self._range_max = _sparse_table(gap_row)

    @property
    def leaf_positions(self):
        return self.start[: self.n_points]

    def lca_rows(self, p, q):
        """Row of the merge that is the LCA of leaf positions p < q (arrays)."""
        length = q - p
        level = np.frexp(length)[1] - 1  # floor(log2(length)), exact
        table = self._range_max
        return np.maximum(table[level, p], table[level, q - (1 << level)])


def _sparse_table(values):
    """``table[j, i] = max(values[i : i + 2**j])`` wherever that slice is full."""
    n = len(values)
    table = np.zeros((max(1, n.bit_length()), n), dtype=values.dtype)
    table[0] = values
    for level in range(1, table.shape[0]):
        half = 1 << (level - 1)
        stop = n - 2 * half + 1
        np.maximum(table[level - 1, :stop], table[level - 1, half : half + stop],
                   out=table[level, :stop])
    return table


###############################################################################
# Metrics


def dendrogram_purity(labels_true, tree):
    """Dendrogram purity of a tree with respect to ground-truth classes.

    For every pair of distinct points of the same class, the purity of their
    lowest common ancestor (LCA) in the tree is the fraction of the LCA's
    leaves that belong to that class; dendrogram purity is the mean over all
    such pairs (Heller & Ghahramani 2005; Kobren et al. 2017)::

        DP = 1 / |P| * sum over {i, j} in P of |lca(i, j) & class(i)| / |lca(i, j)|

    with P the unordered same-class pairs. It is 1 for a tree in which every
    class is a subtree, and 1 by convention when no class has two points.

    Computed exactly in O(n log n): each same-class pair that is adjacent
    among its class in the dendrogram's leaf order marks one merge where
    that class is split between the two children, and the class counts on
    either side of that merge follow from binary searches; pairs whose LCA
    is that merge number ``n_left * n_right``. 200,000 points take well under
    a second.

    Parameters
    ----------
    labels_true : array-like of shape (n_samples,)
        Ground-truth class of every point (any hashable values).
    tree : array-like of shape (n_samples - 1, 4) or (n_samples - 1, 2)
        A scipy linkage matrix or a scikit-learn ``children_`` array, e.g.
        ``ExactHierarchicalClustering().fit(X).linkage_matrix_``.

    Returns
    -------
    purity : float
        In (0, 1]; higher is better.

    Raises
    ------
    ValueError
        If the tree is not a valid binary tree over ``len(labels_true)``
        points.

    See Also
    --------
    expected_dendrogram_purity : The same score averaged over the exact
        posterior of an ``ExactHierarchicalClustering``.
    make_tree_scorer : Turn it into a ``GridSearchCV`` scorer.
    dasgupta_cost : A score of a tree that needs no labels, only similarities.

    References
    ----------
    K. A. Heller and Z. Ghahramani. Bayesian hierarchical clustering.
    ICML 2005.

    A. Kobren, N. Monath, A. Krishnamurthy, A. McCallum. A hierarchical
    algorithm for extreme clustering. KDD 2017.

    Examples
    --------
    >>> import numpy as np
    >>> from sktrellis.metrics import dendrogram_purity
    >>> children = np.array([[0, 1], [2, 3], [4, 5]])  # ((0, 1), (2, 3))
    >>> dendrogram_purity([0, 0, 1, 1], children)
    1.0
    >>> dendrogram_purity([0, 1, 0, 1], children)  # both pairs meet at the root
    0.5
    """
    labels = _check_labels(labels_true)
    n_points = len(labels)
    merges = _check_tree(tree, n_points, "labels_true")
    _, codes = np.unique(labels, return_inverse=True)
    codes = codes.astype(np.int64)
    n_pairs = np.sum(np.bincount(codes) * (np.bincount(codes) - 1) // 2)
    if n_pairs == 0:
        return 1.0
    layout = _TreeLayout(merges, n_points)

    # Points sorted by (class, leaf position): a class's points are then
    # contiguous and key = class * n + position is increasing.
    keys = codes * n_points + layout.leaf_positions
    order = np.argsort(keys)
    keys, codes, positions = keys[order], codes[order], layout.leaf_positions[order]
    # Each index t whose successor has the same class is a neighbouring pair.
    t = np.flatnonzero(codes[1:] == codes[:-1])
    nodes = n_points + layout.lca_rows(positions[t], positions[t + 1])
    # Point t is the last of its class in the LCA's first child, point t + 1
    # the first in the second child; count the class on each side.
    class_base = codes[t] * n_points
    node_start = layout.start[nodes]
    node_size = layout.size[nodes]
    n_first = t + 1 - np.searchsorted(keys, class_base + node_start)
    n_second = np.searchsorted(keys, class_base + node_start + node_size) - t - 1
    purity_sum = np.sum(
        n_first.astype(np.float64) * n_second * (n_first + n_second) / node_size
    )
    return float(purity_sum / n_pairs)


def dasgupta_cost(tree, affinity):
    """Compute Dasgupta's cost of a tree: similar points should be split low.

    ``cost = sum over inner nodes v of |v| * W(left(v), right(v))``, where
    ``|v|`` is the number of leaves under v and ``W(A, B)`` the total
    similarity between the points of its two children, each unordered pair
    counted once (Dasgupta 2016). Equivalently, every pair of points pays its
    similarity times the size of its lowest common ancestor. Lower is better;
    the diagonal of ``affinity`` is ignored.

    This is the energy of :class:`~sktrellis.energies.Dasgupta`: for the same
    similarities (``Dasgupta(...).similarities(X)``) a tree's log potential
    is ``-beta * dasgupta_cost(tree, affinity)``, so the MAP tree of
    ``ExactHierarchicalClustering(Dasgupta(beta=b))`` has cost
    ``-map_log_potential_ / b``, the minimum over all trees.

    Parameters
    ----------
    tree : array-like of shape (n_samples - 1, 4) or (n_samples - 1, 2)
        A scipy linkage matrix or a scikit-learn ``children_`` array.
    affinity : array-like of shape (n_samples, n_samples)
        Symmetric, finite pairwise similarities.

    Returns
    -------
    cost : float
        The summed cost, non-negative; lower is better.

    Raises
    ------
    ValueError
        If ``affinity`` is not a symmetric, finite, non-negative square
        matrix or the tree is not a valid binary tree over its ``n_samples``
        points.

    See Also
    --------
    sktrellis.energies.Dasgupta : The energy whose MAP tree minimises this cost.
    dendrogram_purity : A score of a tree against ground-truth classes.
    make_tree_scorer : Turn it into a ``GridSearchCV`` scorer.

    References
    ----------
    S. Dasgupta. A cost function for similarity-based hierarchical
    clustering. STOC 2016.

    Examples
    --------
    >>> import numpy as np
    >>> from sktrellis.metrics import dasgupta_cost
    >>> affinity = np.array([[0, 5, 1], [5, 0, 1], [1, 1, 0]])
    >>> dasgupta_cost([[0, 1], [2, 3]], affinity)  # 2 * 5 + 3 * (1 + 1)
    16.0
    >>> dasgupta_cost([[0, 2], [1, 3]], affinity)  # 2 * 1 + 3 * (5 + 1)
    20.0
    """
    # Dasgupta's cost is defined for non-negative similarities (a negative
    # one would reward cutting it high in the tree).
    affinity = check_square_matrix(affinity, "affinity", allow_negative=False)
    n_points = affinity.shape[0]
    if n_points == 0:
        raise ValueError("affinity is empty: the cost needs at least one point")
    merges = _check_tree(tree, n_points, "affinity")
    if n_points == 1:
        return 0.0
    layout = _TreeLayout(merges, n_points)
    # In leaf order each merge's cross similarities form one contiguous block.
    leaf_order = np.argsort(layout.leaf_positions)
    affinity = affinity[np.ix_(leaf_order, leaf_order)]
    start, size = layout.start.tolist(), layout.size.tolist()
    cost = 0.0
    for row, (a, b) in enumerate(merges.tolist()):
        block = affinity[start[a] : start[a] + size[a], start[b] : start[b] + size[b]]
        cost += size[n_points + row] * block.sum()
    return float(cost)


def expected_dendrogram_purity(labels_true, estimator):
    """Dendrogram purity averaged over the exact posterior of the trees.

    ``E[DP] = sum over trees T of P(T | X) * dendrogram_purity(labels_true, T)``
    computed exactly (no sampling): over all (2n-3)!! trees for a fitted
    :class:`~sktrellis.ExactHierarchicalClustering`, in O(3**n) like the fit
    itself; over the trees spanned by the sparse trellis, with the posterior
    restricted to them, for a fitted :class:`~sktrellis.SparseTrellisClustering`
    (in time linear in its number of splits).

    Derivation: a same-class pair {i, j} has its LCA at the node C of a tree
    exactly when C is a node whose split (A, B) puts i and j on different
    sides. So, with P(C, A) the posterior probability that C is a node split
    into (A, C \\ A) and ``n_A[k]`` the number of points of class k in A,
    ``E[DP] = 1/|P| * sum over C, A of P(C, A) * g(A, B)`` where
    ``g = sum_k n_A[k] n_B[k] (n_A[k] + n_B[k]) / |C|`` is the summed purity of
    the pairs split there. ``g = (T(C) - T(A) - T(B)) / (3 |C|)`` with
    ``T(S) = sum_k n_S[k]**3`` (from ``(a + b)**3 = a**3 + b**3 + 3ab(a + b)``),
    so one table of T over all subsets suffices. The split probabilities come
    from the trellis: ``P(C, A) = P(C) psi(A, B) Z(A) Z(B) / Z(C)`` with P(C)
    the cluster marginal of the outside pass. Cluster marginals alone do not
    determine E[DP]: it depends on which child holds which points.

    Parameters
    ----------
    labels_true : array-like of shape (n_samples,)
        Ground-truth class of every point.
    estimator : ExactHierarchicalClustering, SparseTrellisClustering or Pipeline
        Fitted; a pipeline's last step is used.

    Returns
    -------
    expected_purity : float
        The posterior mean of the dendrogram purity, in (0, 1]; 1 when no
        class has two points.

    Raises
    ------
    TypeError
        If the estimator has no exact posterior over trees.

    See Also
    --------
    dendrogram_purity : The purity of one tree, e.g. the MAP tree.
    make_posterior_scorer : Turn it into a ``GridSearchCV`` scorer.

    Examples
    --------
    >>> import numpy as np
    >>> from sktrellis import ExactHierarchicalClustering
    >>> from sktrellis.energies import Dasgupta
    >>> from sktrellis.metrics import dendrogram_purity, expected_dendrogram_purity
    >>> X = np.array([[0.0], [0.3], [4.0], [4.4], [4.1]])
    >>> y = [0, 0, 1, 1, 1]
    >>> model = ExactHierarchicalClustering(Dasgupta(beta=0.5)).fit(X)
    >>> dendrogram_purity(y, model.linkage_matrix_)
    1.0
    >>> round(expected_dendrogram_purity(y, model), 3)  # other trees count too
    0.782
    """
    final = final_step(estimator)
    check_is_fitted(final)
    posterior = getattr(final, "posterior_", None)
    if not isinstance(posterior, TreePosterior):
        raise TypeError(
            "expected_dendrogram_purity needs the exact posterior over trees of a "
            "fitted ExactHierarchicalClustering or SparseTrellisClustering; got "
            f"{type(final).__name__}"
        )
    labels = _check_labels(labels_true)
    n_points = posterior.n_points
    if len(labels) != n_points:
        raise ValueError(
            f"labels_true has n_samples={len(labels)} but the estimator was fitted on "
            f"n_samples={n_points}"
        )
    _, codes = np.unique(labels, return_inverse=True)
    counts = np.bincount(codes)
    n_pairs = np.sum(counts * (counts - 1) // 2)
    if n_pairs == 0:
        return 1.0
    cubes = 0.0
    for label in range(len(counts)):
        cubes = cubes + posterior.cluster_sums(codes == label) ** 3
    sizes = posterior.cluster_sums(np.ones(n_points))
    return float(_expected_cube_gain(posterior, cubes, sizes) / n_pairs)


def _expected_cube_gain(posterior, cubes, sizes):
    """Sum over nodes C and splits (A, B) of P(C, A) (T(C) - T(A) - T(B)) / (3 |C|)."""
    total = 0.0
    for parents, lefts, rights, log_probability in posterior.split_blocks():
        gain = cubes[parents] - cubes[lefts] - cubes[rights]
        total += np.sum(np.exp(log_probability) * gain / (3 * sizes[parents]))
    return total


###############################################################################
# Scorers


def _n_samples(X):
    return X.shape[0] if hasattr(X, "shape") else len(X)


def _fitted_final_step(estimator, X, scorer_name):
    """The fitted clusterer at the end of ``estimator``, checked to have seen X.

    A transductive clusterer only describes the points it was fitted on, so
    the scorer refuses data of another size or width. Both checks are O(1);
    they catch the usual mistake, a cross-validation splitter whose test
    folds are not the training data (default ``cv=5``, ``KFold``, ...).
    """
    final = final_step(estimator)
    check_is_fitted(final)
    if hasattr(final, "n_leaves_"):
        n_fitted = final.n_leaves_
    elif hasattr(final, "labels_"):
        n_fitted = len(final.labels_)
    else:
        raise TypeError(
            f"{scorer_name} scores fitted clusterers with labels_; got "
            f"{type(final).__name__}"
        )
    n_given = _n_samples(X)
    recipe = (
        "clusterers are scored on the data they were fitted on; in GridSearchCV use "
        "cv=sktrellis.metrics.TransductiveSplit() (or cv=[(idx, idx)] with "
        "idx = np.arange(n_samples)), not a splitting cv such as the default cv=5"
    )
    if n_given != n_fitted:
        raise ValueError(
            f"{scorer_name} got n_samples={n_given} but the clusterer was fitted on "
            f"n_samples={n_fitted}: {recipe}"
        )
    n_features = getattr(estimator, "n_features_in_", None)
    shape = getattr(X, "shape", None)
    if n_features is not None and shape is not None and len(shape) == 2 and shape[1] != n_features:
        raise ValueError(
            f"{scorer_name} got X with {shape[1]} features but the estimator was fitted "
            f"with n_features_in_={n_features}: {recipe}"
        )
    fitted_sketch = getattr(final, "_fit_sketch", None)
    if fitted_sketch is not None:
        # Same shape is not same data: a held-out fold of equal size must be
        # refused too. Compare what the clusterer itself saw, after the
        # pipeline's transformers, up to rounding.
        sketch = data_sketch(_transform_to_final_step(estimator, X))
        scale = np.max(np.abs(fitted_sketch), initial=0.0)
        if sketch.shape != fitted_sketch.shape or not np.allclose(
            sketch, fitted_sketch, rtol=1e-7, atol=1e-9 * scale
        ):
            raise ValueError(
                f"{scorer_name} got different data than the clusterer was fitted on "
                f"(same n_samples={n_given}, other points): {recipe}"
            )
    return final


def _transform_to_final_step(estimator, X):
    """X as the final step of (possibly nested) pipelines receives it."""
    while isinstance(estimator, Pipeline):
        if len(estimator) > 1:
            X = estimator[:-1].transform(X)
        estimator = estimator[-1]
    return X


def _fitted_tree(final):
    for name in ("linkage_matrix_", "children_"):
        tree = getattr(final, name, None)
        if tree is not None:
            return tree
    raise TypeError(
        f"{type(final).__name__} has no fitted tree: tree scorers need an estimator with "
        "linkage_matrix_ or children_"
    )


class _ClusteringScorer:
    """Callable ``scorer(estimator, X, y)`` built by the ``make_*_scorer`` factories."""

    def __init__(self, score_func, sign, kwargs, reads_posterior):
        self._score_func = score_func
        self._sign = sign
        self._kwargs = kwargs
        self._reads_posterior = reads_posterior

    @property
    def _name(self):
        return getattr(self._score_func, "__name__", repr(self._score_func))

    def __call__(self, estimator, X, y=None):
        final = _fitted_final_step(estimator, X, f"the {self._name} scorer")
        if y is None:
            raise ValueError(
                f"the {self._name} scorer compares the clustering with true labels: "
                "pass them as y, e.g. GridSearchCV(...).fit(X, y)"
            )
        fitted = final if self._reads_posterior else _fitted_tree(final)
        return self._sign * self._score_func(y, fitted, **self._kwargs)

    def __repr__(self):
        factory = "make_posterior_scorer" if self._reads_posterior else "make_tree_scorer"
        options = "" if self._sign > 0 else ", greater_is_better=False"
        options += "".join(f", {key}={value!r}" for key, value in self._kwargs.items())
        return f"{factory}({self._name}{options})"


class TransductiveSplit(BaseCrossValidator):
    """The one "split" that fits and scores a transductive clusterer on all points.

    A clusterer such as :class:`~sktrellis.ExactHierarchicalClustering`
    describes the points it is fitted on and cannot score others, so a grid
    search over its parameters fits and scores every candidate on the whole
    dataset: ``GridSearchCV(..., cv=TransductiveSplit())``. The default
    ``cv=5`` would score each fold's clusterer on held-out points, which the
    scorers of this module refuse.

    See Also
    --------
    make_tree_scorer : A scorer reading the fitted tree.
    make_posterior_scorer : A scorer reading the fitted posterior.
    sklearn.model_selection.PredefinedSplit : Another fixed split.

    Examples
    --------
    >>> import numpy as np
    >>> from sktrellis.metrics import TransductiveSplit
    >>> [(train.tolist(), test.tolist()) for train, test in TransductiveSplit().split(np.zeros((3, 1)))]
    [([0, 1, 2], [0, 1, 2])]
    """

    def split(self, X, y=None, groups=None):
        """Yield the training and test indices: both every point.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The data; only its length is read.
        y : array-like, default=None
            Ignored.
        groups : array-like, default=None
            Ignored.

        Yields
        ------
        train, test : ndarray of int
            Both ``np.arange(n_samples)``.
        """
        indices = np.arange(_n_samples(X))
        yield indices, indices

    def get_n_splits(self, X=None, y=None, groups=None):
        """The number of splits: 1.

        Parameters
        ----------
        X, y, groups : object, default=None
            Ignored.

        Returns
        -------
        n_splits : int
            1.
        """
        return 1


def make_tree_scorer(score_func, *, greater_is_better=True, **kwargs):
    """Scorer for ``GridSearchCV`` from a score of a fitted tree.

    The scorer ``scorer(estimator, X, y)`` reads the tree of the fitted
    clusterer (``linkage_matrix_``, else ``children_``; for a ``Pipeline``, of
    its last step) and returns ``score_func(y, tree, **kwargs)``. It refuses X
    of another size or number of features than the clusterer was fitted on:
    transductive clusterers are scored on their training data, with
    ``cv=TransductiveSplit()`` in grid search.

    Parameters
    ----------
    score_func : callable
        ``score_func(labels_true, tree, **kwargs) -> float``, e.g.
        :func:`dendrogram_purity`.
    greater_is_better : bool, default=True
        Whether high scores are good; if not, the scorer returns the negated
        score, so that grid search still maximises it.
    **kwargs
        Extra arguments of ``score_func``.

    Returns
    -------
    scorer : callable
        ``scorer(estimator, X, y) -> float``.

    See Also
    --------
    make_posterior_scorer : Scores that read the whole posterior.
    log_partition_scorer : A scorer that needs no labels.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.model_selection import GridSearchCV
    >>> from sktrellis import ExactHierarchicalClustering
    >>> from sktrellis.datasets import load_iris12
    >>> from sktrellis.energies import Dasgupta
    >>> from sktrellis.metrics import TransductiveSplit, dendrogram_purity, make_tree_scorer
    >>> iris = load_iris12()
    >>> search = GridSearchCV(
    ...     ExactHierarchicalClustering(Dasgupta(), n_clusters=3),
    ...     {"energy__gamma": [0.01, 1.0]},
    ...     scoring=make_tree_scorer(dendrogram_purity),
    ...     cv=TransductiveSplit(),
    ... ).fit(iris.data, iris.target)
    >>> search.best_params_
    {'energy__gamma': 0.01}
    >>> round(float(search.best_score_), 3)
    1.0
    """
    if not callable(score_func):
        raise TypeError(f"score_func must be callable, got {score_func!r}")
    return _ClusteringScorer(score_func, 1 if greater_is_better else -1, kwargs, False)


def make_posterior_scorer(score_func, *, greater_is_better=True, **kwargs):
    """Scorer for ``GridSearchCV`` from a score of a fitted posterior.

    Like :func:`make_tree_scorer`, but ``score_func`` receives the fitted
    clusterer itself (a pipeline's last step) rather than one tree, so it
    can use the whole posterior, e.g. :func:`expected_dendrogram_purity`.

    Parameters
    ----------
    score_func : callable
        ``score_func(labels_true, fitted_estimator, **kwargs) -> float``.
    greater_is_better : bool, default=True
        Whether high scores are good; if not, the scorer returns the negated
        score.
    **kwargs
        Extra arguments of ``score_func``.

    Returns
    -------
    scorer : callable
        ``scorer(estimator, X, y) -> float``.

    See Also
    --------
    make_tree_scorer : Scores that read one tree.
    expected_dendrogram_purity : A score of the whole posterior to use here.
    log_partition_scorer : A scorer that needs no labels.

    Examples
    --------
    >>> import numpy as np
    >>> from sktrellis import ExactHierarchicalClustering
    >>> from sktrellis.metrics import expected_dendrogram_purity, make_posterior_scorer
    >>> X = np.array([[0.0], [0.3], [4.0], [4.4], [4.1]])
    >>> y = [0, 0, 1, 1, 1]
    >>> scorer = make_posterior_scorer(expected_dendrogram_purity)
    >>> model = ExactHierarchicalClustering().fit(X)
    >>> scorer(model, X, y) == expected_dendrogram_purity(y, model)
    True
    """
    if not callable(score_func):
        raise TypeError(f"score_func must be callable, got {score_func!r}")
    return _ClusteringScorer(score_func, 1 if greater_is_better else -1, kwargs, True)


def log_partition_scorer(estimator, X, y=None):
    """Scorer returning the log partition function ``log_partition_``.

    For an energy that is a normalised likelihood of the data given the tree
    (such as :class:`~sktrellis.energies.GinkgoLikelihood`), ``log Z`` is the
    log marginal likelihood of X under a uniform prior over trees, up to the
    constant ``-log((2n-3)!!)``: maximising it over energy parameters is
    type-II maximum likelihood (empirical Bayes), with no labels needed. For
    unnormalised energies such as Dasgupta's cost, ``log Z`` changes with the
    parameters' scale too and is not comparable across them.

    Use it as ``GridSearchCV(scoring=log_partition_scorer, cv=TransductiveSplit())``;
    it refuses X that the clusterer was not fitted on.

    Parameters
    ----------
    estimator : estimator or Pipeline
        Fitted; its last step must have ``log_partition_``.
    X : array-like of shape (n_samples, n_features)
        The data the estimator was fitted on.
    y : Ignored
        Not used, present for API consistency.

    Returns
    -------
    log_partition : float
        ``log_partition_`` of the fitted clusterer, the log of the summed
        potential of all its trees (or partitions).

    See Also
    --------
    make_tree_scorer : A scorer from a score of one tree and true labels.
    make_posterior_scorer : A scorer from a score of the posterior and true labels.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.model_selection import GridSearchCV
    >>> from sktrellis import ExactHierarchicalClustering
    >>> from sktrellis.datasets import make_jets
    >>> from sktrellis.energies import GinkgoLikelihood
    >>> from sktrellis.metrics import TransductiveSplit, log_partition_scorer
    >>> jet = make_jets(1, n_leaves=7, random_state=0)[0]
    >>> search = GridSearchCV(
    ...     ExactHierarchicalClustering(GinkgoLikelihood()),
    ...     {"energy__lam": [0.5, 1.5, 4.0]},
    ...     scoring=log_partition_scorer,
    ...     cv=TransductiveSplit(),
    ... ).fit(jet.momenta)
    >>> search.best_params_
    {'energy__lam': 0.5}
    """
    final = _fitted_final_step(estimator, X, "log_partition_scorer")
    if not hasattr(final, "log_partition_"):
        raise TypeError(
            f"log_partition_scorer needs an estimator with log_partition_; got "
            f"{type(final).__name__}"
        )
    return float(final.log_partition_)

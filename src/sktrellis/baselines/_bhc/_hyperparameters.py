"""Hyperparameter learning: alpha and the prior scale maximising the DPM evidence lower bound.

EM-like (Heller & Ghahramani 2005, "Learning and prediction"): the tree for
the current values (E step), then both values for that tree (M step), from
several starts.
"""
import numpy as np
from scipy.optimize import minimize

from ._recursion import lower_bound, tree_lower_bound

# Hyperparameter learning stops after this many E steps, or when log p(D | T)
# improves by less than this relative amount.
_EM_MAX_ITER = 20
_EM_TOLERANCE = 1e-9
# The box of hyperparameter learning: alpha within [1e-3, n_samples] (a
# concentration below 1e-3 says one cluster with near certainty whatever
# the data), the prior scale factor within [1e-4, 1e4].
_ALPHA_MIN = 1e-3
_SCALE_RANGE = (1e-4, 1e4)


def fit_hyperparameters(build_tree, X, component, alpha, learn):
    """(bound, alpha, scale, forest, merges, history) of one component model.

    Parameters
    ----------
    build_tree : callable
        ``build_tree(X, component, alpha)`` returns the tree for these
        hyperparameters, as a filled node table and its merges.
    X : ndarray of shape (n_points, n_features)
    component : ConjugateComponent
        The cluster model at prior scale 1.
    alpha : float
        The given concentration, and the first start of the learning.
    learn : bool
        False: the tree at ``alpha`` and scale 1. True: EM from those
        values and from alpha and scale 10 times smaller and larger, the
        run of largest bound kept (the given values among equals).

    Returns
    -------
    bound, alpha, scale, forest, merges, history : tuple
        The evidence lower bound of the tree kept, its hyperparameters, its
        node table and merges, and the bound after each E step of its run.
    """
    scale = 1.0
    if learn:
        low, high = np.exp(log_bounds(X.shape[0])).T
        starts = [(alpha, scale)] + [
            (a, s) for a in (alpha / 10, alpha * 10) for s in (scale / 10, scale * 10)
        ]
        runs = [
            _learn(build_tree, X, component, *np.clip((a, s), low, high)) for a, s in starts
        ]
        # The best bound; the first (the given values) among equals.
        best = max(range(len(runs)), key=lambda i: (runs[i][0], -i))
        return runs[best]
    forest, merges = build_tree(X, component, alpha)
    history = [lower_bound(forest, alpha)]
    return history[-1], alpha, scale, forest, merges, history


def log_bounds(n_points):
    """Search box of (log alpha, log scale): alpha in [1e-3, N], scale in [1e-4, 1e4]."""
    return [(np.log(_ALPHA_MIN), np.log(max(n_points, 2.0))),
            (np.log(_SCALE_RANGE[0]), np.log(_SCALE_RANGE[1]))]


def _best_hyperparameters(X, merges, component, alpha, scale):
    """M step: alpha and the prior scale maximising the lower bound for this tree."""
    def objective(log_values):
        alpha, factor = np.exp(log_values)
        value = tree_lower_bound(X, merges, component.rescaled(factor), alpha)
        return -value if np.isfinite(value) else np.inf

    result = minimize(
        objective, np.log([alpha, scale]), method="Nelder-Mead",
        bounds=log_bounds(len(X)),
        options={"xatol": 1e-4, "fatol": 1e-9, "maxiter": 400},
    )
    return tuple(float(v) for v in np.exp(result.x))


def _learn(build_tree, X, component, alpha, scale):
    """EM from one start: (bound, alpha, scale, forest, merges, history) of the best E step."""
    forest, merges = build_tree(X, component.rescaled(scale), alpha)
    history = [lower_bound(forest, alpha)]
    best = (history[-1], alpha, scale, forest, merges)
    for _ in range(_EM_MAX_ITER):
        alpha, scale = _best_hyperparameters(X, merges, component, alpha, scale)
        forest, merges = build_tree(X, component.rescaled(scale), alpha)
        history.append(lower_bound(forest, alpha))
        if history[-1] > best[0] + _EM_TOLERANCE * max(1.0, abs(best[0])):
            best = (history[-1], alpha, scale, forest, merges)
        else:
            break
    return (*best, history)

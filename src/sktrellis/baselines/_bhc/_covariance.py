"""``covariance_type="auto"``: the candidate covariance types, and those whose tables fit."""
import numpy as np
from sklearn.base import clone

from ..._engine.trellis.best_tree import BEST_TREE_BYTES_PER_SUBSET
from ..._engine.resources import check_exact_size, check_statistics_memory, fits_in_memory

# The candidates, in the order that breaks exact ties.
_AUTO_COVARIANCE_TYPES = ("full", "diag", "spherical")


def named_type(covariance_prior):
    """The covariance type a covariance_prior array names, or None.

    One scale per feature is ``"diag"``'s, a matrix ``"full"``'s; a
    float (or None) suits all three types.
    """
    if covariance_prior is None:
        return None
    return {1: "diag", 2: "full"}.get(np.ndim(covariance_prior))


def with_covariance_type(energy, covariance_type):
    """A clone of a DirichletProcessMixture energy with this covariance type."""
    return clone(energy).set_params(covariance_type=covariance_type)


def covariance_types(energy, covariance_type, fit_bytes):
    """The covariance types fit tries: auto's candidates that fit, or the energy's own.

    ``fit_bytes(covariance_type)`` is the peak memory of a fit of that type.
    """
    if energy.component == "bernoulli" or covariance_type is None:
        return [energy.covariance_type]
    # "full" is the energy's default: any other type was asked for, and
    # "auto" would silently replace it.
    if energy.covariance_type != "full":
        raise ValueError(
            "BayesianHierarchicalClustering(covariance_type='auto') chooses among 'full', "
            "'diag' and 'spherical' and would ignore the energy's "
            f"covariance_type={energy.covariance_type!r}: pass covariance_type=None to fit "
            "that type only"
        )
    if named_type(energy.covariance_prior) is not None:
        return [named_type(energy.covariance_prior)]
    if not fits_in_memory(fit_bytes("full")):
        return list(_AUTO_COVARIANCE_TYPES[1:])
    return list(_AUTO_COVARIANCE_TYPES)


def exact_types_that_fit(energy_of, X, covariance_types):
    """The covariance types whose exact tables fit in memory now, checked before any work.

    The 2**N-subset tables are refused before the first statistic is
    computed (a full covariance over thousands of features would
    otherwise spend minutes on its leaves first). With
    ``covariance_type="auto"`` the candidates that do not fit are left
    out, as the default algorithm leaves out "full"; a given type, or
    no candidate fitting, raises the ValueError of the check.
    ``energy_of(covariance_type)`` is the DPM energy of that type.
    """
    n_points, n_features = X.shape
    fitting, refusal = [], None
    for covariance_type in covariance_types:
        energy = energy_of(covariance_type)
        try:
            check_exact_size(
                n_points,
                (energy.table_bytes_per_subset + BEST_TREE_BYTES_PER_SUBSET) << n_points,
                'BayesianHierarchicalClustering(algorithm="exact")',
                way_out='algorithm="greedy"',
            )
            check_statistics_memory(energy, n_points, n_features,
                                    "BayesianHierarchicalClustering")
        except ValueError as error:
            refusal = refusal or error
            continue
        fitting.append(covariance_type)
    if not fitting:
        raise refusal
    return fitting

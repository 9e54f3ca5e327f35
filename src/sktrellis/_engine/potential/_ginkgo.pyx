"""The Ginkgo splitting likelihood as a split potential function (see GinkgoLikelihood).

One implementation of the public C contract of split potentials
(``sktrellis/energies/__init__.pxd``): the kernels know nothing of it.
"""
from libc.math cimport log, sqrt

import numpy as np

from ._split_potential import SplitPotential, register_split_function

# Positions in SplitData.tables.
cdef enum:
    MASS2 = 0
    SQRT_MASS2 = 1


cdef double ginkgo_log_psi(const SplitData* data, mask_t parent, mask_t left) noexcept nogil:
    """log psi(parent; left, right) from the mass tables."""
    cdef const double* mass2 = data.tables[MASS2]
    cdef const double* root = data.tables[SQRT_MASS2]
    cdef mask_t right = parent ^ left
    return log_psi_of_masses(data.params, mass2[parent], root[parent], mass2[left], root[left],
                             mass2[right], root[right])


# What ginkgo_log_psi reads, checked by SplitPotential.from_cython.
register_split_function(__name__, "ginkgo_log_psi",
                        tables={"mass2": "2**n", "sqrt_mass2": "2**n"}, n_params=N_PARAMS)


def ginkgo_potential(int n_points, mass2, double lam, double t_cut):
    """The Ginkgo potential of N particles from the invariant mass squared of every subset.

    Parameters
    ----------
    n_points : int
    mass2 : ndarray of shape (2**n_points,)
        ``t(S)``, zero for single particles.
    lam, t_cut : float
        The rate and the cut of the model, ``lam > 0`` and ``t_cut >= 0``.

    Returns
    -------
    potential : SplitPotential
    """
    if not (np.isfinite(lam) and lam > 0 and np.isfinite(t_cut) and t_cut >= 0):
        raise ValueError(
            f"the Ginkgo potential needs a finite lam > 0 and t_cut >= 0, got "
            f"lam={lam!r}, t_cut={t_cut!r}"
        )
    mass2 = np.ascontiguousarray(mass2, dtype=np.float64)
    tables = {"mass2": mass2, "sqrt_mass2": np.sqrt(np.maximum(mass2, 0.0))}
    params = ginkgo_params(lam, t_cut)
    return SplitPotential.from_cython(n_points, __name__, "ginkgo_log_psi", tables, params)


def ginkgo_params(double lam, double t_cut):
    """The scalar parameters of the Ginkgo formula, in their ``SplitData.params`` layout."""
    params = [0.0] * N_PARAMS
    params[LAM] = lam
    params[T_CUT] = t_cut
    params[LOG_LAM] = log(lam)
    params[LOG_NORM] = log(-np.expm1(-lam))
    # The decay direction is isotropic: 1 / (4 pi) per split.
    params[ISOTROPIC] = -log(4.0 * np.pi)
    return params


def log_psi_of_mass_arrays(mass2_parent, mass2_left, mass2_right, double lam, double t_cut):
    """Vectorised log psi of splits from the three invariant masses squared (broadcast).

    The same C formula as the kernels evaluate, for the merge models of the
    greedy and beam searches and for ``make_jets``.
    """
    parent, left, right = np.broadcast_arrays(
        *(np.asarray(v, dtype=np.float64) for v in (mass2_parent, mass2_left, mass2_right)))
    shape = parent.shape
    cdef const double[::1] t_p = np.ascontiguousarray(parent).ravel()
    cdef const double[::1] t_l = np.ascontiguousarray(left).ravel()
    cdef const double[::1] t_r = np.ascontiguousarray(right).ravel()
    cdef double[::1] out = np.empty(t_p.shape[0])
    cdef double params[N_PARAMS]
    cdef Py_ssize_t i
    for i, value in enumerate(ginkgo_params(lam, t_cut)):
        params[i] = value
    with nogil:
        for i in range(t_p.shape[0]):
            out[i] = log_psi_of_masses(params, t_p[i], sqrt(max(t_p[i], 0.0)),
                                       t_l[i], sqrt(max(t_l[i], 0.0)),
                                       t_r[i], sqrt(max(t_r[i], 0.0)))
    return np.asarray(out).reshape(shape)

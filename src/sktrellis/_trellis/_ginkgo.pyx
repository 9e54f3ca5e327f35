# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The Ginkgo splitting likelihood as a split potential function (DESIGN.md section 6).

One implementation of the public C contract of split potentials
(``sktrellis/energies/__init__.pxd``): the kernels know nothing of it.
"""
from libc.math cimport INFINITY, exp, log, log1p

import numpy as np

from ._hierarchical import SplitPotential

# Positions in SplitData.params.
cdef enum:
    LAM = 0
    T_CUT = 1
    LOG_LAM = 2
    LOG_NORM = 3
    ISOTROPIC = 4

# Positions in SplitData.tables.
cdef enum:
    MASS2 = 0
    SQRT_MASS2 = 1


cdef inline double child_term(const double* params, double tau, double child_mass2) noexcept nogil:
    # g(tau, t) of DESIGN.md section 6: a child's mass given its parent's scale.
    if tau <= 0.0:
        return -INFINITY
    if child_mass2 > 0.0:
        return (params[LOG_LAM] - log(tau) - params[LAM] * child_mass2 / tau
                - params[LOG_NORM])
    return log1p(-exp(-params[LAM] * params[T_CUT] / tau)) - params[LOG_NORM]


cdef double ginkgo_log_psi(const SplitData* data, mask_t parent, mask_t left) noexcept nogil:
    """log psi(parent; left, right): the heavier child's mass, then the lighter's."""
    cdef const double* mass2 = data.tables[MASS2]
    cdef const double* root = data.tables[SQRT_MASS2]
    cdef const double* params = data.params
    cdef mask_t right = parent ^ left, heavy, light
    cdef double t_parent = mass2[parent], scale_light
    if t_parent < params[T_CUT]:
        return -INFINITY
    if mass2[left] >= mass2[right]:
        heavy, light = left, right
    else:
        heavy, light = right, left
    scale_light = root[parent] - root[heavy]
    return (child_term(params, t_parent, mass2[heavy])
            + child_term(params, scale_light * scale_light, mass2[light])
            + params[ISOTROPIC])


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
    params = [0.0] * 5
    params[LAM] = lam
    params[T_CUT] = t_cut
    params[LOG_LAM] = log(lam)
    params[LOG_NORM] = log(-np.expm1(-lam))
    # The decay direction is isotropic: 1 / (4 pi) per split.
    params[ISOTROPIC] = -log(4.0 * np.pi)
    return SplitPotential.from_cython(n_points, __name__, "ginkgo_log_psi", tables, params)

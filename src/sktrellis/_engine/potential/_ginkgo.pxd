# Declared here so that Cython exports it in the module's __pyx_capi__,
# where SplitPotential.from_cython finds it, as it finds a user's function.
from libc.math cimport INFINITY, exp, log, log1p

from sktrellis.energies cimport SplitData, mask_t

cdef double ginkgo_log_psi(const SplitData* data, mask_t parent, mask_t left) noexcept nogil


# Positions in SplitData.params of the Ginkgo potential; the search bound
# (_search_bounds.pyx) keeps its parameters in the same layout.
cdef enum:
    LAM = 0
    T_CUT = 1
    LOG_LAM = 2
    LOG_NORM = 3
    ISOTROPIC = 4
    N_PARAMS = 5


cdef inline double child_term(const double* params, double tau, double child_mass2) noexcept nogil:
    # g(tau, t) of the GinkgoLikelihood docstring: a child's mass given its parent's scale.
    if tau <= 0.0:
        return -INFINITY
    if child_mass2 > 0.0:
        return (params[LOG_LAM] - log(tau) - params[LAM] * child_mass2 / tau
                - params[LOG_NORM])
    return log1p(-exp(-params[LAM] * params[T_CUT] / tau)) - params[LOG_NORM]


cdef inline double log_psi_of_masses(const double* params, double t_parent, double root_parent,
                                     double t_left, double root_left, double t_right,
                                     double root_right) noexcept nogil:
    """log psi from the three masses squared t and their square roots.

    The one copy of the formula (``sktrellis.energies._ginkgo.ginkgo_log_psi``
    calls it on arrays): the heavier child's mass given the parent's, then
    the lighter's given what the heavier leaves.
    """
    cdef double scale_light
    if t_parent < params[T_CUT]:
        return -INFINITY
    if t_left >= t_right:
        scale_light = root_parent - root_left
        return (child_term(params, t_parent, t_left)
                + child_term(params, scale_light * scale_light, t_right) + params[ISOTROPIC])
    scale_light = root_parent - root_right
    return (child_term(params, t_parent, t_right)
            + child_term(params, scale_light * scale_light, t_left) + params[ISOTROPIC])

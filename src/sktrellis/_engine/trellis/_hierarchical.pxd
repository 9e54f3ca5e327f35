# The C entry points of ``_hierarchical.pyx`` for other compiled modules.

from .._common cimport mask_t


# log Z, log MAP and MAP split of every subset of m points under the Ginkgo
# potential (documented at its definition); nogil, one thread, returns 0.
cdef int ginkgo_subset_tables(const double* params, int m, const double* mass2,
                              const double* root, double* log_z, double* log_map,
                              mask_t* best_left, double* records) noexcept nogil

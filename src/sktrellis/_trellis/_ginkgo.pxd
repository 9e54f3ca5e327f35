# Declared here so that Cython exports it in the module's __pyx_capi__,
# where SplitPotential.from_cython finds it, as it finds a user's function.
from sktrellis.energies cimport SplitData, mask_t

cdef double ginkgo_log_psi(const SplitData* data, mask_t parent, mask_t left) noexcept nogil

# The partition-function bounds of the best-first search
# (_log_partition.pyx): brackets on log Z of every cluster and on the log
# probability of a cluster, and the walk that narrows the root's bracket.

from libc.stdint cimport int64_t, uint64_t

from ._graph cimport SearchGraph
from ._search_bounds cimport SearchBound


cdef bint z_refresh_within(SearchGraph* g, double seconds, int64_t max_revisions,
                           int64_t* n_revised) except -1
cdef int z_step(SearchGraph* g, SearchBound bound, double deadline,
                int64_t max_states) except -1 nogil
cdef int cluster_bracket(SearchGraph* g, SearchBound bound, uint64_t target, double* low,
                         double* high) except -1 nogil

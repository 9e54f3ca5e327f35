# The MAP walk of the best-first search (_map_search.pyx): revise a
# cluster's bounds on its best tree, and walk from the root to generate one
# split.

from ._graph cimport SearchGraph
from ._search_bounds cimport SearchBound


cdef int revise(SearchGraph* g, int node, int followed, double* follow_value,
                double* next_out) except -2 nogil
cdef int step(SearchGraph* g, SearchBound bound) except -1 nogil

"""The MAP walk of the best-first search (AO*) over the explored graph.

Each walk goes from the root along the splits of smallest lower bound
(``cost + lower(A) + lower(B)``) to a cluster whose next ungenerated split
could be the best, generates that one split, and revises the bounds of the
clusters on the path bottom-up. A cluster's lower bound is the smallest over
its generated splits and its generator's next key, so it stays admissible;
bounds of clusters off the path are revised when the walk next passes them
(they can only be too low, never too high). A cluster is solved when its
lower bound meets the cost of its best known subtree.
"""
from libc.math cimport INFINITY
from libcpp.algorithm cimport pop_heap, push_heap
from libcpp.vector cimport vector

from ._graph cimport (
    MAP_OBJECTIVE, SearchGraph, Split, SplitKey, expand, improve_upper, larger_key)
from ._search_bounds cimport SearchBound
from ._search_common cimport tolerance
from ._split_generator cimport next_key, release_generator


cdef int revise(SearchGraph* g, int node, int followed, double* follow_value,
                double* next_out) except -2 nogil:
    """Revise the bounds of ``node``; return the split to follow (or -1).

    The splits sit in a heap keyed by ``cost + lower(A) + lower(B)`` as
    last computed. Lower bounds only rise, so a stale key is still a
    lower bound: refreshing the top until it is current finds the
    smallest without rescanning every split (the root of a Ginkgo search
    holds tens of thousands). The upper bound (a real tree's cost) is
    revised from each split refreshed and from ``followed``, the split
    the walk went down, whose parts' subtrees may have improved.
    """
    cdef vector[SplitKey]* heap = &g.split_heap[node]
    cdef int follow = -1
    cdef double best_value = INFINITY, value, lower, key
    cdef Split* split
    if followed >= 0:
        improve_upper(g, node, followed)
    while not heap.empty():
        follow = heap[0][0].index
        split = &g.splits[node][follow]
        value = split.cost + g.lower_bound[split.a] + g.lower_bound[split.b]
        improve_upper(g, node, follow)
        if value > heap[0][0].key:
            # Stale: take it out and put it back with its current key.
            pop_heap(heap.begin(), heap.end(), larger_key)
            heap[0][heap.size() - 1].key = value
            push_heap(heap.begin(), heap.end(), larger_key)
            continue
        # A key a hair too high (a part's lower bound snapped down to its
        # cost when it was solved) only needs lowering at the top.
        heap[0][0].key = value
        best_value = value
        break
    if g.generator[node] < 0:
        # Not expanded yet: its own bound stands for every split.
        key = g.lower_bound[node]
    else:
        key = next_key(&g.generators[g.generator[node]])
    lower = min(best_value, min(key, g.upper_bound[node]))
    if lower > g.lower_bound[node]:
        g.lower_bound[node] = lower
    if (not g.solved_flag[node]
            and g.lower_bound[node] >= g.upper_bound[node] - tolerance(g.upper_bound[node])):
        g.lower_bound[node] = g.upper_bound[node]
        g.solved_flag[node] = 1
        # The log Z walk still needs the splits of a cluster whose best
        # tree is known.
        if g.objective == MAP_OBJECTIVE:
            if g.generator[node] >= 0:
                # Its open partial splits and the generator itg.
                g.n_states -= release_generator(&g.generators[g.generator[node]]) + 1
            vector[SplitKey]().swap(heap[0])
    if follow_value != NULL:
        follow_value[0] = best_value
        next_out[0] = key
    return follow


cdef int step(SearchGraph* g, SearchBound bound) except -1 nogil:
    """One walk from the root: generate one split and revise the path's bounds."""
    cdef int node = g.root, follow, a, b, k
    cdef double value, key
    g.path.clear()
    g.path_split.clear()
    while True:
        follow = revise(g, node, -1, &value, &key)
        if g.solved_flag[node]:
            break
        if key <= value:
            expand(g, bound, node)
            revise(g, node, -1, NULL, NULL)
            break
        g.path.push_back(node)
        g.path_split.push_back(follow)
        a = g.splits[node][follow].a
        b = g.splits[node][follow].b
        # Both solved would make ``value`` a tree cost, hence the node solved.
        if g.solved_flag[a] or (not g.solved_flag[b] and g.size[b] > g.size[a]):
            node = b
        else:
            node = a
    for k in range(<int>g.path.size() - 1, -1, -1):
        revise(g, g.path[k], g.path_split[k], NULL, NULL)
    g.n_iterations += 1
    return 0

###########################################################################
# The partition function

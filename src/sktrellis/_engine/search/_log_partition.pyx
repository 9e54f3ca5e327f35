"""Bounds on the partition function from the explored graph, and the walk that narrows them.

The graph bounds the partition function ``Z(S) = sum over trees of prod
psi`` of every cluster from both sides (E. Dechter and R. Dechter, "A note
on bounding the partition function by search"). By induction on the size
of clusters, ``z_low(S) <= log Z(S) <= z_high(S)`` for every cluster S of
the map: singletons have Z = 1; clusters solved by ``solve_exactly`` sum
every split over exact parts; for the others, ``Z(S) = sum over the splits
(A, B) of psi(A, B) Z(A) Z(B)``, and ``z_revise`` bounds the generated
splits' terms by their parts' brackets (induction) and the ungenerated
ones, from below by 0 and from above by ``rest_term`` (each tree under them
costs at least ``rest_key``, and there are at most that many trees). Any
single known tree also bounds Z from below.

The probability of a cluster C, ``P(C) = W(root) / Z(root)`` with ``W(S)``
the sum over the trees over S that hold C, is bracketed by induction like
Z: ``W(C) = Z(C)``, ``W(S) = 0`` unless C <= S; for a cluster solved
exactly, W is summed exactly (``exact_with``); otherwise the generated
splits with C inside a part contribute ``psi * W(part) * Z(other part)``,
bounded by the parts' brackets, and the ungenerated splits at most
``rest_term`` (every tree under them, holding C or not), and ``W(S) <=
Z(S)``. Then ``W_low / Z_high <= P(C) <= W_high / Z_low`` (capped at 1).

With ``objective="log_partition"`` the walks (``z_step``) go where the
root's bracket is widest instead of along the best split.
"""
from cpython.exc cimport PyErr_CheckSignals
from cython.operator cimport dereference as deref
from libc.math cimport INFINITY, isfinite
from libc.stdint cimport int64_t, uint64_t
from libcpp.unordered_map cimport unordered_map
from libcpp.vector cimport vector

from .._common cimport log_add
from ._graph cimport (
    SearchGraph, Split, enumerated_size, expand, open_rest_key, rest_term)
from ._map_search cimport revise
from ._search_bounds cimport MAX_SEARCH_POINTS, SearchBound
from ._search_common cimport log_sub, members_of, now_seconds


cdef int z_revise(SearchGraph* g, int node) except -1 nogil:
    """Revise the log Z bracket of ``node`` from its splits' and parts' brackets.

    Lower: the sum over the generated splits of ``psi * Z_low(A) *
    Z_low(B)`` counts only trees of the explored graph, each once (the
    splits of S are distinct and the trees under one split are the
    products of the parts' trees); a known tree of cost ``upper``
    alone gives ``-upper``. Upper: the same sum with ``Z_high`` plus
    ``rest_term`` for the splits not generated yet. Parts' brackets
    only narrow, so the new bracket is intersected with the old one
    (which may hold the bound's own ``log_z_upper`` of the cluster).
    The bracket closes (exact) when no split is left and every part is
    exact: both sums then add the same numbers.
    """
    cdef Split* split
    cdef double low = -INFINITY, high = -INFINITY, rest
    cdef bint exact = True
    cdef size_t k
    if g.z_exact[node]:
        return 0
    for k in range(g.splits[node].size()):
        split = &g.splits[node][k]
        low = log_add(low, g.z_low[split.a] + g.z_low[split.b] - split.cost)
        high = log_add(high, g.z_high[split.a] + g.z_high[split.b] - split.cost)
        exact = exact and g.z_exact[split.a] and g.z_exact[split.b]
    g.rest_key[node] = max(g.rest_key[node], open_rest_key(g, node))
    rest = rest_term(g, node)
    if exact and rest == -INFINITY:
        g.z_low[node] = g.z_high[node] = low
        g.z_exact[node] = 1
        return 0
    high = log_add(high, rest)
    if isfinite(g.upper_bound[node]):
        low = max(low, -g.upper_bound[node])
    if low > g.z_low[node]:
        g.z_low[node] = low
    if high < g.z_high[node]:
        g.z_high[node] = high
    return 0


# The refresh reads the clock once per this many split terms revised (a
# clock read costs tens of nanoseconds, a split term a few): the clock
# adds about a percent, and a cut comes within a few microseconds of the
# deadline, or one cluster's revision.
cdef enum:
    CLOCK_TERMS = 1024
# Longest the revision runs without the GIL, between two checks of Ctrl-C.
cdef double REFRESH_SLICE_SECONDS = 0.1


cdef int refresh_order(SearchGraph* g, vector[int]* order) except -1 nogil:
    """Every cluster id, smallest clusters first (parts before the clusters they split)."""
    cdef vector[size_t] start
    cdef int node, k
    start.assign(g.n_points + 2, 0)
    for node in range(<int>g.mask.size()):
        start[g.size[node] + 1] += 1
    for k in range(g.n_points + 1):
        start[k + 1] += start[k]
    order.resize(g.mask.size())
    for node in range(<int>g.mask.size()):
        deref(order)[start[g.size[node]]] = node
        start[g.size[node]] += 1
    return 0


cdef int z_refresh(SearchGraph* g, const vector[int]* order, size_t* position,
                   double deadline, int64_t* revisions_left) except -1 nogil:
    """Revise the brackets of ``order[position:]`` in turn; 1 once all are, 0 if cut short.

    Cut short at ``deadline`` (``now_seconds``, read before the first
    revision and then every ``CLOCK_TERMS`` split terms) or when
    ``revisions_left`` reaches 0 (negative: no cap); ``position`` and
    ``revisions_left`` are advanced, so the next call goes on from there.
    Every revision keeps every bracket valid, whatever was revised before
    it and in whatever order (``z_revise`` bounds a cluster by its parts'
    brackets, valid by induction, and intersects with its own), so a
    refresh cut anywhere leaves certified brackets; the order, parts
    before the clusters they split, is what lets one complete pass carry
    every part's narrowing up to the root.
    """
    cdef int64_t terms = CLOCK_TERMS
    cdef int node
    while position[0] < order.size():
        if revisions_left[0] == 0:
            return 0
        if terms >= CLOCK_TERMS:
            if now_seconds() >= deadline:
                return 0
            terms = 0
        node = deref(order)[position[0]]
        z_revise(g, node)
        terms += 1 + <int64_t>g.splits[node].size()
        position[0] += 1
        if revisions_left[0] > 0:
            revisions_left[0] -= 1
    return 1


cdef bint z_refresh_within(SearchGraph* g, double seconds, int64_t max_revisions,
                           int64_t* n_revised) except -1:
    """Revise every bracket, smallest clusters first, for ``seconds`` and ``max_revisions``.

    Whether every cluster was revised; ``n_revised`` counts them. The
    ``seconds`` include the ordering of the clusters (``refresh_order``, a
    counting sort over all of them, skipped when either limit is 0). Without
    the GIL in slices of at most ``REFRESH_SLICE_SECONDS``, Ctrl-C checked
    between them (KeyboardInterrupt leaves every bracket certified). A
    pass cut short (by either limit, Ctrl-C or an allocation failure) ends
    by revising the root from its parts' brackets as they are, past the
    limits (its splits only, not counted in ``n_revised``): the root comes
    last in the pass, and the MAP walks never revise the lower brackets,
    so without it a cut left the root's lower bound at -inf, where its
    revision gives at least the best known tree's log potential.
    """
    cdef vector[int] order
    cdef size_t position = 0
    cdef int64_t left = max_revisions
    cdef double deadline = now_seconds() + seconds
    cdef int done = 0
    n_revised[0] = 0
    try:
        if seconds == 0 or max_revisions == 0:
            return 0
        with nogil:
            refresh_order(g, &order)
        while True:
            with nogil:
                done = z_refresh(g, &order, &position,
                                 min(deadline, now_seconds() + REFRESH_SLICE_SECONDS), &left)
            n_revised[0] = <int64_t>position
            if done or left == 0 or now_seconds() >= deadline:
                return done
            PyErr_CheckSignals()
    finally:
        if not done:
            with nogil:
                z_revise(g, g.root)


cdef int z_step(SearchGraph* g, SearchBound bound, double deadline,
                int64_t max_states) except -1 nogil:
    """One walk to the widest part of the log Z bracket, then revise the path.

    At each cluster the bracket's width ``Z_high - Z_low`` is the sum of
    the widths of its generated splits and of the ungenerated rest. The
    walk generates more splits where the rest is widest (one, or a
    quarter as many as it has, so that revising a cluster of many splits
    stays a small share of the work), and otherwise goes down the widest
    split into its part with the wider bracket. The quarter stops early at
    ``deadline`` (``now_seconds``) or once ``n_states`` reaches
    ``max_states`` (if not negative): it grows with the cluster's splits,
    and on a Ginkgo jet of 20 particles one such batch at the root (tens
    of thousands of splits, each new part solved exactly) took 8 s, so the
    run's deadline and state cap are kept within one split.
    """
    cdef int node = g.root, choice, a, b, k, n_new
    cdef double widest, width
    cdef Split* split
    g.path.clear()
    g.path_split.clear()
    while not g.z_exact[node]:
        revise(g, node, -1, NULL, NULL)
        z_revise(g, node)
        if g.z_exact[node]:
            break
        widest = rest_term(g, node)
        choice = -1
        for k in range(<int>g.splits[node].size()):
            split = &g.splits[node][k]
            if g.z_exact[split.a] and g.z_exact[split.b]:
                continue
            width = log_sub(g.z_high[split.a] + g.z_high[split.b] - split.cost,
                            g.z_low[split.a] + g.z_low[split.b] - split.cost)
            # A bracket narrower than rounding still needs its parts
            # closed before the cluster counts as exact.
            if width > widest or (choice < 0 and widest == -INFINITY):
                widest, choice = width, k
        if choice < 0:
            n_new = 1 + <int>g.splits[node].size() // 4
            for k in range(n_new):
                if k > 0 and (now_seconds() >= deadline
                              or 0 <= max_states <= g.n_states):
                    break
                if not expand(g, bound, node):
                    break
            revise(g, node, -1, NULL, NULL)
            z_revise(g, node)
            break
        g.path.push_back(node)
        g.path_split.push_back(choice)
        a = g.splits[node][choice].a
        b = g.splits[node][choice].b
        if g.z_exact[a] or (not g.z_exact[b] and g.z_high[b] - g.z_low[b]
                               > g.z_high[a] - g.z_low[a]):
            node = b
        else:
            node = a
    for k in range(<int>g.path.size() - 1, -1, -1):
        revise(g, g.path[k], g.path_split[k], NULL, NULL)
        z_revise(g, g.path[k])
    g.n_iterations += 1
    return 0


cdef double exact_with(SearchGraph* g, SearchBound bound, uint64_t cluster,
                       uint64_t target,
                       unordered_map[uint64_t, double]* memo) except? -2 nogil:
    """log of the sum over the trees over ``cluster`` that hold ``target`` as a node.

    For a cluster solved by ``solve_exactly`` (whose sub-clusters of
    non-zero potential are all in the map, with exact log Z), by the
    recursion: ``W(target) = Z(target)`` and, for target < X,
    ``W(X) = sum over the splits (A, B) of X with target <= A of psi(A,
    B) W(A) Z(B)`` (a tree over X holds the target iff the part that
    contains it does).
    """
    cdef unordered_map[uint64_t, double].iterator found
    cdef unordered_map[uint64_t, int].iterator part
    cdef int members[MAX_SEARCH_POINTS]
    cdef uint64_t rest, side_b, sides, full
    cdef int m, k
    cdef double total = -INFINITY, cost, with_a
    if cluster == target:
        part = g.index.find(target)
        return g.z_low[deref(part).second] if part != g.index.end() else -INFINITY
    found = memo.find(cluster)
    if found != memo.end():
        return deref(found).second
    m = members_of(cluster, members)
    full = ((<uint64_t>1) << (m - 1) << 1) - 1
    rest = cluster & ~target
    side_b = rest
    while side_b:
        sides = 0
        for k in range(m):
            if side_b >> members[k] & 1:
                sides |= (<uint64_t>1) << k
        if sides & 1:
            sides ^= full
        cost = bound.split_cost_(members, m, sides)
        if cost < INFINITY:
            part = g.index.find(side_b)
            with_a = exact_with(g, bound, cluster ^ side_b, target, memo)
            if part != g.index.end() and with_a > -INFINITY:
                total = log_add(total, with_a + g.z_low[deref(part).second] - cost)
        side_b = (side_b - 1) & rest
    memo[0][cluster] = total
    return total


cdef int with_bounds(SearchGraph* g, SearchBound bound, int node, uint64_t target,
                     double* low, double* high,
                     unordered_map[uint64_t, int]* seen, vector[double]* values,
                     unordered_map[uint64_t, double]* memo) except -1 nogil:
    """Bracket the log sum over the trees over ``node`` that hold ``target``."""
    cdef unordered_map[uint64_t, int].iterator found
    cdef Split* split
    cdef double part_low, part_high, total_low = -INFINITY, total_high = -INFINITY
    cdef uint64_t cluster = g.mask[node]
    cdef size_t k
    if cluster & target != target:
        low[0] = high[0] = -INFINITY
        return 0
    if cluster == target:
        low[0], high[0] = g.z_low[node], g.z_high[node]
        return 0
    found = seen.find(cluster)
    if found != seen.end():
        low[0] = values[0][2 * deref(found).second]
        high[0] = values[0][2 * deref(found).second + 1]
        return 0
    if g.size[node] <= enumerated_size(g):
        total_low = total_high = exact_with(g, bound, cluster, target, memo)
    else:
        for k in range(g.splits[node].size()):
            split = &g.splits[node][k]
            if g.mask[split.a] & target == target:
                with_bounds(g, bound, split.a, target, &part_low, &part_high, seen, values, memo)
                part_low += g.z_low[split.b]
                part_high += g.z_high[split.b]
            elif g.mask[split.b] & target == target:
                with_bounds(g, bound, split.b, target, &part_low, &part_high, seen, values, memo)
                part_low += g.z_low[split.a]
                part_high += g.z_high[split.a]
            else:
                continue
            total_low = log_add(total_low, part_low - split.cost)
            total_high = log_add(total_high, part_high - split.cost)
        # Trees under ungenerated splits may hold the target: all of them count.
        total_high = log_add(total_high, rest_term(g, node))
        total_low = max(total_low, -INFINITY)
        total_high = min(total_high, g.z_high[node])
    seen[0][cluster] = <int>(values.size() // 2)
    values.push_back(total_low)
    values.push_back(total_high)
    low[0], high[0] = total_low, total_high
    return 0


cdef int cluster_bracket(SearchGraph* g, SearchBound bound, uint64_t target, double* low,
                         double* high) except -1 nogil:
    """Bracket the log sum over the trees over the root that hold ``target``."""
    cdef unordered_map[uint64_t, int] seen
    cdef vector[double] values
    cdef unordered_map[uint64_t, double] memo
    return with_bounds(g, bound, g.root, target, low, high, &seen, &values, &memo)

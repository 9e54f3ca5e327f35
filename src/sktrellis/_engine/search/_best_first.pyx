"""Best-first AND/OR search (AO*) for the minimum-cost tree over up to 64 points.

The search keeps the explored AND/OR graph (``_graph.pyx``): clusters
keyed by their 64-bit mask, nothing sized by 2**N. Each iteration walks
from the root along the splits of smallest lower bound to a cluster whose
next ungenerated split could be the best, generates that one split, and
revises the bounds of the clusters on the path bottom-up
(``_map_search.pyx``); the search ends when the root is solved, or at a
budget with the certified gap between the two.

The splits of a cluster come from a lazy generator (``_split_generator.pyx``),
in order of the bound's lower bound (``_search_bounds.pxd``). With a bound
that sees the assignment (Dasgupta, correlation clustering by penalties,
Ginkgo by its sides' key ``partial_key_``) the 2**(|S| - 1) splits of a
large cluster are never all held; with one blind to it (Ginkgo with
``use_sides_bound(False)``) every partial key is the same: its generator
goes through the splits by the size of their smaller side instead, in
order of the bound's bound per size (``SearchBound.size_classes_``), and
holds every split of a size class before the first of them leaves it.

The same graph bounds the partition function ``Z(S) = sum over trees of
prod psi`` of every cluster from both sides (``_log_partition.pyx``); with
``objective="log_partition"`` the walks go where that bracket is widest
instead of along the best split.

Costs are ``-log psi``; everything runs without the GIL, and a call of
``BestFirstSearch.run`` returns within about ``seconds`` so that the
Python driver can report progress, check its budget and let Ctrl-C in;
``log_partition_bounds`` revises the brackets within its ``seconds`` in
slices of at most 0.1 s, checking Ctrl-C between them (``z_refresh_within``).
"""
from libc.math cimport INFINITY, isfinite
from libc.stdint cimport int64_t, uint64_t
from libcpp.vector cimport vector

import numpy as np

from ._graph cimport (
    LOG_PARTITION_OBJECTIVE, MAP_OBJECTIVE, SearchGraph, Split, add_split, cluster,
    release_open_states, start_graph)
from ._log_partition cimport cluster_bracket, z_refresh_within, z_step
from ._map_search cimport revise, step
from ._search_bounds cimport MAX_EXACT_POINTS, MAX_SEARCH_POINTS, SearchBound
from ._search_common cimport members_of, now_seconds, side_a_mask
from ._split_generator cimport Generator, next_key, pop_split, start_generator

from ..tree.conversion import masks_from_merges


#: Most points a search takes: clusters are keyed by 64-bit masks.
MAX_POINTS = MAX_SEARCH_POINTS

# Largest cluster solved exactly on creation (3**20 / 2 splits).
MAX_EXACT_SIZE = MAX_EXACT_POINTS


###############################################################################
# The run loop

cdef enum:
    # Reasons ``run`` returns.
    SOLVED = 0
    SLICE_OVER = 1
    STATE_CAP = 2


cdef int run_walks(SearchGraph* g, SearchBound bound, double seconds,
                   int64_t max_states) except -1 nogil:
    """Walk until the objective is reached, ``seconds`` pass or the state cap; the reason."""
    cdef double deadline = now_seconds() + seconds
    cdef bint by_map = g.objective == MAP_OBJECTIVE
    while True:
        if (g.solved_flag[g.root] if by_map else g.z_exact[g.root]):
            return SOLVED
        if max_states >= 0 and g.n_states >= max_states:
            return STATE_CAP
        # The clock every walk: it costs tens of nanoseconds, a walk
        # microseconds to milliseconds (an exact solve of a cluster).
        if now_seconds() >= deadline:
            return SLICE_OVER
        if by_map:
            step(g, bound)
        else:
            z_step(g, bound, deadline, max_states)


cdef int seed_tree(SearchGraph* g, SearchBound bound, masks, merges) except -1:
    """Store the splits of a tree (``add_tree``), ``masks`` its nodes' masks."""
    cdef uint64_t a, b, low
    cdef int members[MAX_SEARCH_POINTS]
    cdef int node, m, k
    cdef uint64_t sides
    cdef Split split
    masks_a = [masks[a] for a, _ in merges]
    masks_b = [masks[b] for _, b in merges]
    for a_int, b_int in zip(masks_a, masks_b):
        a, b = a_int, b_int
        low = (a | b) & (~(a | b) + 1)
        if not a & low:
            a, b = b, a
        split.a = cluster(g, bound, a)
        split.b = cluster(g, bound, b)
        node = cluster(g, bound, a | b)
        if g.solved_flag[node]:
            continue
        m = members_of(a | b, members)
        sides = 0
        for k in range(m):
            if b >> members[k] & 1:
                sides |= (<uint64_t>1) << k
        split.cost = bound.split_cost_(members, m, sides)
        add_split(g, node, split)
        g.seed[node] = a
        revise(g, node, -1, NULL, NULL)
    return 0


###############################################################################
# Python access

cdef class SplitGenerator:
    """The splits of one cluster, one at a time in order of their bound (for tests).

    Parameters
    ----------
    bound : SearchBound
    members : array-like of int
        The cluster's points, sorted, at most 64 (the generator assigns
        them in the bound's order).
    """

    # A one-element vector, so that the generator's C++ members are
    # constructed and destroyed with the object.
    cdef vector[Generator] g
    cdef SearchBound bound

    def __init__(self, SearchBound bound, members):
        cdef uint64_t mask = 0
        for i in members:
            mask |= (<uint64_t>1) << int(i)
        self.bound = bound
        self.g.resize(1)
        start_generator(&self.g[0], bound, mask, INFINITY, NULL, NULL)

    @property
    def next_key(self):
        """A lower bound on the key of every split not generated yet."""
        return next_key(&self.g[0])

    @property
    def n_open(self):
        """Open partial states."""
        return self.g[0].heap.size()

    def pop_split(self, double ceiling=INFINITY):
        """The next split (boolean ``in_a`` over the members) below ``ceiling``, or None."""
        cdef uint64_t sides, a
        cdef int k
        if not pop_split(&self.g[0], self.bound, ceiling, &sides):
            return None
        a = side_a_mask(self.g[0].members, self.g[0].m, sides)
        # In the order of the sorted members, the lowest on side A.
        in_a = np.array(sorted(self.g[0].members[k] for k in range(self.g[0].m)))
        in_a = np.array([bool(a >> int(i) & 1) for i in in_a])
        return in_a if in_a[0] else ~in_a



cdef class BestFirstSearch:
    """AO*-style best-first search for the minimum-cost tree over N <= 64 points.

    Not thread-safe: ``run`` and the bounds' revision of the brackets
    change the search without the GIL, so one search has one thread.

    Every cluster also carries a bracket ``z_low <= log Z(S) <= z_high`` on
    its partition function ``Z(S)``, the sum over the trees over S of the
    product of their split potentials (see ``log_partition_bounds``).

    Parameters
    ----------
    bound : SearchBound
        The energy's admissible bound.
    n_points : int
        Number of points, 1 to 64.
    objective : {"map", "log_partition"}, default="map"
        Where the walks go: along the split of least lower bound until the
        best tree is proven ("map"; splits that cannot beat the best known
        tree are never generated), or to the largest contribution to the
        width of the log Z bracket until the bracket closes
        ("log_partition"; no split is pruned).
    exact_size : int, default=-1
        Clusters of at most this many points (0 to 20) are solved exactly,
        for their best tree and their log Z, by the trellis recursion over
        their subsets when the search creates them; -1 takes the bound's
        ``exact_size``. Two points are always solved.

    Attributes
    ----------
    n_states : int
        Clusters plus open partial states of the split generators (plus,
        for "log_partition", the generated splits, about as large): what the
        memory cap counts.
    n_clusters, n_expanded, n_splits, n_iterations : int
    log_partition_refreshed : bool
        Whether every log Z bracket was revised since the last change.
    n_revised : int
        Clusters whose bracket the last revision's pass revised (a pass
        cut short then revises the root too, not counted here).
    """

    cdef SearchBound bound
    # A one-element vector, so that the graph's C++ members are constructed
    # and destroyed with the object; g points to it.
    cdef vector[SearchGraph] graph
    cdef SearchGraph* g
    # Set when an allocation failed inside a walk: the clusters and splits
    # made before it are whole (a split is stored after its clusters, the
    # best tree is read through stored splits only), but the walk's own
    # cluster, split or generator may be half made, so the search neither
    # runs again nor revises its brackets; the root's bounds, from earlier
    # walks, still hold.
    cdef readonly bint out_of_memory
    # Cleared by what changes the graph: a complete revision is a fixed point.
    cdef readonly bint log_partition_refreshed
    cdef readonly int64_t n_revised

    def __cinit__(self):
        self.graph.resize(1)
        self.g = &self.graph[0]

    def __init__(self, SearchBound bound, int n_points, objective="map", int exact_size=-1):
        if not 1 <= n_points <= MAX_SEARCH_POINTS:
            raise ValueError(f"n_points must be 1 to {MAX_SEARCH_POINTS}, got {n_points}")
        if objective not in ("map", "log_partition"):
            raise ValueError(
                f"objective must be 'map' or 'log_partition', got objective={objective!r}")
        if not -1 <= exact_size <= MAX_EXACT_SIZE:
            raise ValueError(
                f"exact_size must be -1 (the bound's) or 0 to {MAX_EXACT_SIZE} (3**k / 2 "
                f"splits per cluster), got exact_size={exact_size}")
        self.bound = bound
        start_graph(self.g, bound, n_points,
                    MAP_OBJECTIVE if objective == "map" else LOG_PARTITION_OBJECTIVE,
                    bound.exact_size if exact_size < 0 else exact_size)

    def add_tree(self, merges):
        """Seed the upper bounds with a tree, given by its merges.

        ``merges`` is (n_points - 1, 2), children first: row k joins nodes
        ``merges[k]`` into node ``n_points + k`` (points are nodes 0..N-1),
        as the agglomerative searches and ``merges_from_tree`` give them.
        """
        self.log_partition_refreshed = False
        seed_tree(self.g, self.bound, masks_from_merges(merges, self.g.n_points), merges)

    def run(self, double seconds=INFINITY, int64_t max_states=-1):
        """Iterate until the objective is reached, for about ``seconds``, or to the state cap.

        Returns "optimal" (MAP proven, or log Z exact), "slice" (``seconds``
        used up) or "max_states" (``n_states`` reached ``max_states``, if not
        negative).
        """
        cdef int reason
        cdef SearchBound bound = self.bound
        if self.out_of_memory:
            return "max_states"
        self.log_partition_refreshed = False
        try:
            with nogil:
                reason = run_walks(self.g, bound, seconds, max_states)
        except MemoryError:
            # std::bad_alloc in a walk: the memory cap, found the hard way.
            # The open partial splits (most of the memory) are never read
            # again: freed, so that the best tree can still be built.
            self.out_of_memory = True
            release_open_states(self.g)
            reason = STATE_CAP
        return ("optimal", "slice", "max_states")[reason]

    cdef int refresh(self, double seconds, int64_t max_revisions) except -1:
        """The bounds' revision of the brackets, within the limits, unless a complete one is
        current or an allocation failed (the graph may be half made; the root's still holds)."""
        if not seconds >= 0:
            raise ValueError(f"seconds must be at least 0, got seconds={seconds}")
        self.n_revised = 0
        if not (self.out_of_memory or self.log_partition_refreshed):
            self.log_partition_refreshed = z_refresh_within(self.g, seconds, max_revisions,
                                                            &self.n_revised)
        return 0

    def log_partition_bounds(self, double seconds=INFINITY, int64_t max_revisions=-1):
        """(lower, upper) bounds on log Z, the log sum over every tree of its potential.

        Certified at any time (E. Dechter and R. Dechter, "A note on
        bounding the partition function by search"; the proof is in
        ``_log_partition.pyx``). The brackets are first revised from their
        parts, smallest clusters first (``z_refresh_within``): cut short
        (the clock, ``max_revisions``, Ctrl-C every 0.1 s), every bracket
        still holds, and the root, last in that order, is revised from its
        parts as they are: at least ``-upper``, the best tree's log potential.

        Parameters
        ----------
        seconds : float, default=inf
            Longest the revision may take, its ordering of the clusters
            included (within one cluster's revision); 0 revises the root only.
        max_revisions : int, default=-1
            Revise at most this many clusters (-1: all), then the root.

        Returns
        -------
        lower, upper : float
            ``lower <= log Z <= upper``; equal when the search has summed
            every tree (``log_partition_solved``).
        """
        self.refresh(seconds, max_revisions)
        return self.g.z_low[self.g.root], self.g.z_high[self.g.root]

    def cluster_log_probability_bounds(self, uint64_t target, double seconds=INFINITY):
        """(lower, upper) bounds on log P(target is a node of the tree), for Gibbs P.

        ``W_low / Z_high <= P(C) <= W_high / Z_low`` (capped at 1), with
        ``W(S)`` the sum over the trees over S that hold C, bracketed by
        induction like Z (the proof is in ``_log_partition.pyx``), after
        the log Z brackets are revised for at most ``seconds`` as by
        ``log_partition_bounds``; the pass for W is not limited by it.

        Parameters
        ----------
        target : int
            The cluster's mask, at least one point.
        seconds : float, default=inf
            Longest the revision of the log Z brackets may take.

        Returns
        -------
        lower, upper : float
            Bounds on the log probability (-inf lower when the explored
            graph has no tree holding the cluster yet).
        """
        cdef double low, high
        cdef SearchBound bound = self.bound
        self.refresh(seconds, -1)
        if self.out_of_memory:
            # Nothing can be walked safely: the bounds every cluster has.
            return -INFINITY, 0.0
        with nogil:
            cluster_bracket(self.g, bound, target, &low, &high)
        return low - self.g.z_high[self.g.root], min(0.0, high - self.g.z_low[self.g.root])

    @property
    def root_log_partition_bracket(self):
        """The root's (lower, upper) as last revised: valid (brackets only narrow), maybe wide."""
        return self.g.z_low[self.g.root], self.g.z_high[self.g.root]

    @property
    def log_partition_solved(self):
        """Whether log Z is known exactly (the bracket has closed)."""
        return bool(self.g.z_exact[self.g.root])

    @property
    def finished(self):
        """Whether the objective is reached: MAP proven, or log Z exact."""
        if self.g.objective == MAP_OBJECTIVE:
            return bool(self.g.solved_flag[self.g.root])
        return bool(self.g.z_exact[self.g.root])

    @property
    def solved(self):
        """Whether the root is solved (the best tree is proven optimal)."""
        return bool(self.g.solved_flag[self.g.root])

    @property
    def upper(self):
        """Cost of the best tree found (inf if none)."""
        return self.g.upper_bound[self.g.root]

    @property
    def lower(self):
        """Lower bound on the cost of every tree."""
        return self.g.lower_bound[self.g.root]

    @property
    def gap(self):
        """upper - lower, >= 0; 0 when proven optimal."""
        return max(0.0, self.g.upper_bound[self.g.root] - self.g.lower_bound[self.g.root])

    @property
    def n_points(self):
        """Number of points."""
        return self.g.n_points

    @property
    def exact_size(self):
        """Clusters of at most this many points are solved exactly on creation."""
        return self.g.exact_size

    @property
    def n_clusters(self):
        """Clusters created (solved or not)."""
        return self.g.mask.size()

    @property
    def n_states(self):
        """What the memory cap counts (see the class docstring)."""
        return self.g.n_states

    @property
    def n_expanded(self):
        """Clusters whose split generator has started."""
        return self.g.n_expanded

    @property
    def n_splits(self):
        """Splits generated, or tried by an exact solve."""
        return self.g.n_splits

    @property
    def n_split_keys(self):
        """Complete splits whose bound the split generators computed.

        The generators' work: a large cluster's generator may evaluate
        many splits before the first is good enough to leave it (blind
        bounds, while a size class is enumerated), and this count moves
        while the others stand still.
        """
        cdef size_t k
        cdef int64_t total = 0
        for k in range(self.g.generators.size()):
            total += self.g.generators[k].n_keys
        return total

    @property
    def root_split_keys(self):
        """Splits of the root whose bound its generator computed (of 2**(N - 1) - 1)."""
        if self.g.generator[self.g.root] < 0:
            return 0
        return self.g.generators[self.g.generator[self.g.root]].n_keys

    @property
    def n_iterations(self):
        """Walks from the root."""
        return self.g.n_iterations

    def merges(self):
        """The best tree found as (merges, log potentials), children first."""
        if not isfinite(self.g.upper_bound[self.g.root]):
            raise ValueError("the search has found no tree of non-zero potential yet")
        merges, log_potentials = [], []
        self._build(self.g.root, merges, log_potentials)
        return np.array(merges, dtype=np.int64).reshape(-1, 2), np.array(log_potentials)

    def _build(self, int node, list merges, list log_potentials):
        cdef Split split
        if self.g.size[node] == 1:
            return int(self.g.mask[node]).bit_length() - 1
        split = self.g.splits[node][self.g.best[node]]
        left = self._build(split.a, merges, log_potentials)
        right = self._build(split.b, merges, log_potentials)
        merges.append((left, right))
        log_potentials.append(-split.cost)
        return self.g.n_points + len(merges) - 1

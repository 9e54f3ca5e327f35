"""The Ginkgo bound: an upper bound on the log likelihood of every tree over a cluster.

``GinkgoBound`` gives the best-first search (``_best_first.pyx``) the
admissible bound of :class:`~sktrellis.energies.GinkgoLikelihood` (the
contract is ``_search_bounds.pxd``; its docstring proves the bound). The
jet's tables sit in a ``GinkgoJet`` record read by the kernels below, module
functions without the GIL; the class owns the arrays they point into and a
memo of ``lower(S)`` by cluster mask.
"""
from libc.math cimport INFINITY, NAN, exp, isnan, lgamma, log, log1p, M_PI, M_LN2, sqrt
from libc.stdint cimport uint64_t
from libc.stdlib cimport calloc, free, malloc

import numpy as np

from .._common cimport float64_t, log_add, mask_t
from ..potential._ginkgo cimport LOG_LAM, LOG_NORM, N_PARAMS, T_CUT, log_psi_of_masses
from ..trellis._hierarchical cimport ginkgo_subset_tables
from ._search_common cimport members_of
from ._search_bounds cimport (
    CLUSTER_CANNOT_SPLIT, MAX_EXACT_POINTS, MAX_SEARCH_POINTS, SUBSETS_SOLVED, SearchBound,
    side_of)

from ..potential._ginkgo import ginkgo_params


# Whether new GinkgoBounds key partial splits by their sides (``use_sides_bound``).
cdef bint sides_bound_enabled = True
# Whether their sides' keys keep the widest sets' tables (``reuse_side_tables``).
cdef bint side_tables_reused = True


def use_sides_bound(bint enabled):
    """Let the Ginkgo bounds made next key partial splits by their sides (the default) or not.

    Returns the previous setting. Off, their split generators go by size
    classes (kept for the benchmark that compares both).
    """
    global sides_bound_enabled
    previous = sides_bound_enabled
    sides_bound_enabled = enabled
    return previous


def reuse_side_tables(bint enabled):
    """Let the Ginkgo bounds made next keep the sides' tables by widest set (the default) or not.

    Returns the previous setting. Either way a key is the same, bit for
    bit; off, each key computes its widest sets' tables afresh (kept for
    the benchmark and the tests that compare both).
    """
    global side_tables_reused
    previous = side_tables_reused
    side_tables_reused = enabled
    return previous


cdef enum:
    # GinkgoBound knows the lightest nodes of up to this many points ...
    SMALL_NODE_SIZE = 4
    # ... and looks at most this many of each size before it bounds the rest.
    NODE_SCAN = 256
    # Doubles of scratch per subset of an exact solve: the summed
    # four-momentum, t, sqrt t, and the kernel's record of four.
    SUBSET_SCRATCH = 10


def _small_nodes(momenta, double t_cut, int largest):
    """The jet's k-nodes for k = 2..largest, as (masks, t less a margin), lightest first.

    A set of k points is a k-node if a tree over it has non-zero likelihood:
    its t reaches t_cut and it splits into parts that are nodes or single
    points (a pair: its t alone; a triple: it holds a 2-node; four points:
    a 3-node, or two 2-nodes). t is summed from the four-momenta as the
    likelihood sums it, and is taken 1e-12 of the squared energy higher
    against the cut and as much lower for the bound, so rounding can
    neither exclude a node nor make one lighter than its bound.
    """
    from itertools import combinations

    n = momenta.shape[0]
    bit = np.left_shift(np.uint64(1), np.arange(n, dtype=np.uint64))
    nodes, found = [], {1: bit}
    for k in range(2, largest + 1):
        points = np.array(list(combinations(range(n), k)), dtype=np.intp).reshape(-1, k)
        total = momenta[points].sum(axis=1)
        t = total[:, 0] ** 2 - np.sum(total[:, 1:] ** 2, axis=1)
        margin = 1e-12 * total[:, 0] ** 2
        masks = np.bitwise_or.reduce(bit[points], axis=1) if len(points) else np.zeros(0, np.uint64)
        is_node = t + margin >= t_cut
        # Some split of the k points into a (k - h)-node and an h-node or point.
        splits = np.zeros(len(points), dtype=bool)
        for h in range(1, k // 2 + 1):
            for part in combinations(range(k), h):
                side = np.bitwise_or.reduce(bit[points[:, list(part)]], axis=1)
                splits |= np.isin(side, found[h]) & np.isin(masks ^ side, found[k - h])
        is_node &= splits
        order = np.argsort(t[is_node], kind="stable")
        found[k] = masks[is_node]
        nodes.append((np.ascontiguousarray(masks[is_node][order]),
                      np.ascontiguousarray((t - margin)[is_node][order])))
    return nodes


def _leaf_slack(momenta, pair_mass, point_mass):
    """s: how far a node with a leaf child x can be lighter than its other child c.

    ``t_v - t_c = t_x + sum over j in c of t_xj`` (bilinearity) is at
    least the most negative, over x, of the negative parts of its own t and
    row (0 for causal momenta; about ``-4e-9 E**2`` at the 1e-9 spacelike
    deficit the energy accepts): s is minus that, plus 1e-12 of the jet's
    squared energy for the rounding of the likelihood's sums (as
    ``_small_nodes``).
    """
    if not len(momenta):
        return 0.0
    own = np.minimum(point_mass, 0.0) + np.minimum(pair_mass, 0.0).sum(axis=1)
    return float(-own.min() + 1e-12 * momenta[:, 0].sum() ** 2)


###############################################################################
# The jet, as the kernels read it

cdef struct GinkgoJet:
    const float64_t* p4          # four-momenta, (n, 4)
    const float64_t* pair_t      # t_ij = 2 p_i.p_j, (n, n)
    const float64_t* self_t      # the points' own t_i
    const int* pair_order        # each row of pair_t's columns by t_ij, (n, n)
    Py_ssize_t n
    double lam, t_cut
    double params[N_PARAMS]
    double log_lam, log_norm, kappa
    # c = max(lam, c0): over tau >= c0 t, a child's g(tau, t) peaks at
    # tau = c t (the class docstring).
    double peak
    # The jet's k-nodes, k = 2..SMALL_NODE_SIZE: masks and t (less a
    # rounding margin), lightest first.
    const uint64_t* node_mask[SMALL_NODE_SIZE + 1]
    const float64_t* node_low[SMALL_NODE_SIZE + 1]
    Py_ssize_t node_count[SMALL_NODE_SIZE + 1]


###############################################################################
# Kernels: the bound of the class docstring, one cluster at a time


cdef double mass2(const GinkgoJet* jet, const int* members, int m, uint64_t sides,
                  int side) noexcept nogil:
    """t of the points of ``members`` on ``side`` (leaves: 0)."""
    cdef double total[4]
    cdef int x, c, count = 0
    total[0] = total[1] = total[2] = total[3] = 0.0
    for x in range(m):
        if side_of(sides, x) == side:
            count += 1
            for c in range(4):
                total[c] += jet.p4[4 * members[x] + c]
    if count < 2:
        return 0.0
    return total[0] * total[0] - total[1] * total[1] - total[2] * total[2] - total[3] * total[3]


cdef double split_cost(const GinkgoJet* jet, const int* members, int m,
                       uint64_t sides) noexcept nogil:
    """-log psi of the split, its sums of momenta in the order of the point indices.

    Members in any order (the generator's, ``GinkgoBound.order_``) give
    the costs of the sorted members bit for bit, as the exact solves and
    the trellis sum them.
    """
    cdef int whole[MAX_SEARCH_POINTS]
    cdef int left[MAX_SEARCH_POINTS]
    cdef int right[MAX_SEARCH_POINTS]
    cdef uint64_t mask[2]
    cdef double t_parent, t_left, t_right
    cdef int x, n_left
    for x in range(1, m):
        if members[x] < members[x - 1]:
            mask[0] = mask[1] = 0
            for x in range(m):
                mask[side_of(sides, x)] |= (<uint64_t>1) << members[x]
            members_of(mask[0] | mask[1], whole)
            n_left = members_of(mask[0], left)
            t_parent = mass2(jet, whole, m, 0, 0)
            t_left = mass2(jet, left, n_left, 0, 0)
            t_right = mass2(jet, right, members_of(mask[1], right), 0, 0)
            break
    else:
        t_parent = mass2(jet, members, m, 0, 0)
        t_left = mass2(jet, members, m, sides, 0)
        t_right = mass2(jet, members, m, sides, 1)
    return -log_psi_of_masses(jet.params, t_parent, sqrt(max(t_parent, 0.0)),
                              t_left, sqrt(max(t_left, 0.0)),
                              t_right, sqrt(max(t_right, 0.0)))


cdef inline double inner_max(const GinkgoJet* jet, double tau_low, double log_tau_low,
                             double t_low, double log_t_low) noexcept nogil:
    """I(T, L): the largest g(tau, t) over t >= L, tau >= max(c0 t, T) (logs given)."""
    if jet.peak * t_low >= tau_low:
        return jet.kappa - log_t_low
    return jet.log_lam - log_tau_low - jet.lam * t_low / tau_low - jet.log_norm


cdef double negative_part(const GinkgoJet* jet, const int* members, int m) noexcept nogil:
    """neg: the sum of the negative t_i over S, less 1e-12 E_S**2.

    The margin is for rounding (as ``_small_nodes``'): the likelihood sums
    a node's four-momenta, the L_k sum the t_ij and t_i.
    """
    cdef double negative = 0.0, energy = 0.0
    cdef int x
    for x in range(m):
        energy += jet.p4[4 * members[x]]
        if jet.self_t[members[x]] < 0.0:
            negative += jet.self_t[members[x]]
    return negative - 1e-12 * energy * energy


cdef bint node_masses(const GinkgoJet* jet, const int* members, int m, double* low,
                      double* single) noexcept nogil:
    """low[k] = L_k for k = 1..m - 1 (L_1 = 0) and single[q] = R_q for q = 1..m - 2.

    Returns False when no two points of S make a node (no pair reaches
    t_cut): then no tree over S has a non-zero likelihood.
    """
    # by_size[j][x] = r_x(j + 1), the sum of the j + 1 smallest t_xy of x's
    # row (the sort below reads one j at a time).
    cdef double by_size[MAX_SEARCH_POINTS][MAX_SEARCH_POINTS]
    cdef double row_values[MAX_SEARCH_POINTS + 1]
    cdef double root_low[MAX_SEARCH_POINTS + 1]
    cdef double column[MAX_SEARCH_POINTS]
    cdef int by_column[MAX_SEARCH_POINTS]
    cdef double negative, value, total, smallest
    cdef int x, y, z, k, q, l, moving
    cdef Py_ssize_t row
    cdef uint64_t mask = 0
    for x in range(m):
        mask |= (<uint64_t>1) << members[x]
    negative = negative_part(jet, members, m)
    for x in range(m):
        row = members[x] * jet.n
        # The row's m - 2 smallest pair masses in order: the jet's row in
        # order, less the points outside S (and x itself), without a
        # branch on which points those are.
        q = 0
        for y in range(jet.n):
            z = jet.pair_order[row + y]
            row_values[q] = jet.pair_t[row + z]
            q += ((mask & ~((<uint64_t>1) << members[x])) >> z) & 1
            if q == m - 2:
                break
        value = 0.0
        for y in range(m - 2):
            value += row_values[y]
            by_size[y][x] = value
        by_column[x] = x
    low[0] = low[1] = 0.0
    for k in range(2, m):
        # The k smallest r_x(k - 1) over the points x of S: an insertion
        # sort from the order of the k before (nearly sorted already).
        for x in range(m):
            moving = by_column[x]
            value = by_size[k - 2][moving]
            z = x
            while z > 0 and column[z - 1] > value:
                column[z] = column[z - 1]
                by_column[z] = by_column[z - 1]
                z -= 1
            column[z] = value
            by_column[z] = moving
        total = 0.0
        for x in range(k):
            total += column[x]
        single[k - 1] = column[0]
        low[k] = max(0.5 * total + negative, jet.t_cut)
    if not raise_to_small_nodes(jet, members, m, low):
        return False
    # A node of k points splits into children of h + l points
    # (``split_mass``, with the roots of the L_h taken once).
    root_low[2] = sqrt(low[2])
    for k in range(3, m):
        # A leaf and k - 1 points.
        smallest = low[k - 1] + single[k - 1] + negative
        for l in range(2, k // 2 + 1):
            value = root_low[k - l] + root_low[l]
            value = value * value + negative
            if value < smallest:
                smallest = value
        low[k] = max(low[k], smallest)
        root_low[k] = sqrt(low[k])
    return True


cdef bint raise_to_small_nodes(const GinkgoJet* jet, const int* members, int m,
                               double* low) noexcept nogil:
    """Raise L_k, k = 2..min(SMALL_NODE_SIZE, m - 1), to the least t of a k-node in S.

    The jet's k-nodes (subsets of k points that can be a node of a tree
    of non-zero likelihood) are sorted by t: the first that lies in S is
    the lightest of S. After NODE_SCAN without one, every k-node of S
    is at least as heavy as the next in the list. Returns False when S
    holds no pair that can be a node (no tree over S, m >= 2).
    """
    cdef uint64_t mask = 0
    cdef const uint64_t* node_mask
    cdef Py_ssize_t count, k_node
    cdef double least
    cdef int x, k
    for x in range(m):
        mask |= (<uint64_t>1) << members[x]
    for k in range(2, min(SMALL_NODE_SIZE, m - 1) + 1):
        node_mask = jet.node_mask[k]
        count = jet.node_count[k]
        least = INFINITY
        for k_node in range(count):
            if k_node == NODE_SCAN and k != 2:
                least = jet.node_low[k][k_node]
                break
            if node_mask[k_node] & mask == node_mask[k_node]:
                least = jet.node_low[k][k_node]
                break
        if k == 2 and least == INFINITY:
            return False
        if least > low[k]:
            low[k] = least
    return True


cdef inline double split_mass(const double* low, const double* single, double negative,
                              int k, int h, int l) noexcept nogil:
    """ell(k, h, l): the least t of a node of k points with children of h and l points."""
    cdef double value
    if k == 2:
        return low[2]
    if l == 1 or h == 1:
        value = low[k - 1] + single[k - 1] + negative
    else:
        value = sqrt(low[h]) + sqrt(low[l])
        value = value * value + negative
    return value if value > low[k] else low[k]


cdef bint subtree_tables(const GinkgoJet* jet, const int* members, int m, double* low,
                         double* log_low, double* single, double* negative, double* inside,
                         double* with_term) noexcept nogil:
    """L_k, log L_k, R_q, neg and inside(k), with(k) for k < m of the class docstring.

    They bound every node of k < m points inside ``members`` (m >= 3),
    whichever tree over whichever subset holds it. Returns False when no
    two points of ``members`` make a node (``node_masses``).
    """
    cdef double value, heavy, top_in, top_with, cherry
    cdef double log_4pi = log(4 * M_PI)
    cdef int k, h, l, x
    negative[0] = negative_part(jet, members, m)
    if not node_masses(jet, members, m, low, single):
        return False
    for k in range(2, m):
        log_low[k] = log(low[k])
    with_term[1] = -jet.log_norm
    inside[1] = 0.0
    cherry = log1p(-exp(-jet.lam * jet.t_cut / low[2])) - jet.log_norm
    inside[2] = 2 * cherry - log_4pi
    with_term[2] = jet.kappa - log_low[2] + inside[2]
    for k in range(3, m):
        top_in = top_with = -INFINITY
        for h in range(2, k):
            l = k - h
            heavy = heavy_child(jet, low, log_low, with_term, inside, k, h, l)
            value = heavy + with_term[l] - log_4pi
            if value > top_in:
                top_in = value
            # ell(k, h, l) >= L_k: the node's own term is at most kappa -
            # log L_k, so only a split that could still win takes a log.
            if value + (jet.kappa - log_low[k]) > top_with:
                heavy = split_mass(low, single, negative[0], k, h, l)
                value += jet.kappa - (log_low[k] if heavy == low[k] else log(heavy))
                if value > top_with:
                    top_with = value
        inside[k] = top_in
        with_term[k] = top_with
    return True


cdef double root_value(const GinkgoJet* jet, const double* low, const double* log_low,
                       const double* single, double negative, const double* inside,
                       const double* with_term, int m, double t_root,
                       double* by_heavy) noexcept nogil:
    """The root's value of a tree over m >= 3 points whose t is ``t_root``.

    The tables are ``subtree_tables``' over the root's points or a superset
    of them. With ``by_heavy`` (not NULL), ``by_heavy[h]`` for h = 2..m - 1
    is the value over the trees whose heavier child has h points.
    """
    # The root: its heavier child c (h points) has tau = t_S, and t_c >=
    # max(ell of c's split, L_l).
    cdef double value, heavy, top = -INFINITY
    cdef double log_4pi = log(4 * M_PI), log_root = log(t_root)
    cdef int h, l, h1
    for h in range(2, m):
        l = m - h
        if h == 2:
            heavy = root_heavy(jet, t_root, log_root, max(low[2], low[l])) + inside[2]
        else:
            heavy = -INFINITY
            for h1 in range(2, h):
                value = (root_heavy(jet, t_root, log_root,
                                    max(split_mass(low, single, negative, h, h1, h - h1),
                                        low[l]))
                         + heavy_child(jet, low, log_low, with_term, inside, h, h1, h - h1)
                         + with_term[h - h1] - log_4pi)
                if value > heavy:
                    heavy = value
        value = heavy + with_term[l] - log_4pi
        if by_heavy != NULL:
            by_heavy[h] = value
        if value > top:
            top = value
    return top


cdef double loose_root_value(const GinkgoJet* jet, const double* low, const double* log_low,
                             const double* inside, const double* with_term, int m,
                             double tau_low, double tau_high) noexcept nogil:
    """``root_value`` with the heavier child's t at least max(L_h, L_l) alone (m >= 3).

    ell(h, h1, h2) >= L_h, so the heavier child's term is at most its value
    there whatever its split, and the root's value is at most the largest
    over h of that term + inside(h) (the heavier child's subtree, a node of
    h points) + with(l) - log(4 pi): O(m) steps where ``root_value`` takes
    O(m**2), for the sides' keys of many sizes. It takes two logs (the
    range's ends): a peak inside the range, ``-log(L) - 1 - n``, comes from
    ``log_low``.
    """
    cdef double value, top = -INFINITY, log_4pi = log(4 * M_PI), tau, t
    cdef double log_tau_low = log(tau_low), log_tau_high = log(tau_high)
    cdef int h, l, big
    for h in range(2, m):
        l = m - h
        big = h if low[h] >= low[l] else l
        # g(tau, t) at its peak over the range: ``root_heavy_within``'s clamp
        # of tau = lam t to [tau_low, tau_high], its logs taken once.
        t = low[big]
        tau = jet.lam * t
        if tau <= tau_low:
            value = jet.log_lam - log_tau_low - jet.lam * t / tau_low
        elif tau >= tau_high:
            value = jet.log_lam - log_tau_high - jet.lam * t / tau_high
        else:
            value = -log_low[big] - 1.0
        value += inside[h] + with_term[l] - log_4pi - jet.log_norm
        if value > top:
            top = value
    return top


cdef double size_programme(const GinkgoJet* jet, const int* members, int m,
                           double* by_heavy) noexcept nogil:
    """lower(S) by the dynamic programme over the sizes (the class docstring).

    With ``by_heavy`` (not NULL, m >= 3), ``by_heavy[h]`` for h = 2..m - 1
    is the root's value over the trees whose heavier child has h points
    (-inf where there is none), of which ``-lower(S)`` is the largest.
    """
    cdef double low[MAX_SEARCH_POINTS + 1]
    cdef double log_low[MAX_SEARCH_POINTS + 1]
    cdef double single[MAX_SEARCH_POINTS + 1]
    # Best log potential of a subtree of k points: with its own incoming
    # term as a lighter child (with_term), and without it (inside).
    cdef double with_term[MAX_SEARCH_POINTS + 1]
    cdef double inside[MAX_SEARCH_POINTS + 1]
    cdef double t, negative
    cdef int h
    if m == 1:
        return 0.0
    if m == 2:
        return split_cost(jet, members, m, 2)
    if by_heavy != NULL:
        for h in range(m):
            by_heavy[h] = -INFINITY
    t = mass2(jet, members, m, 0, 0)
    if t < jet.t_cut:
        return INFINITY
    if not subtree_tables(jet, members, m, low, log_low, single, &negative, inside, with_term):
        return INFINITY
    return -root_value(jet, low, log_low, single, negative, inside, with_term, m, t, by_heavy)


cdef double log_z_upper(const GinkgoJet* jet, const int* members, int m) noexcept nogil:
    cdef double low[MAX_SEARCH_POINTS + 1]
    cdef double log_low[MAX_SEARCH_POINTS + 1]
    cdef double single[MAX_SEARCH_POINTS + 1]
    # log Zin(k), log Zwith(k): sums over the subtrees of any k points.
    cdef double z_with[MAX_SEARCH_POINTS + 1]
    cdef double z_in[MAX_SEARCH_POINTS + 1]
    cdef double t, log_t, negative = 0.0, count, best_in, best_with, value, heavy, total
    cdef double total_in, total_with, cherry, log_4pi = log(4 * M_PI)
    cdef int k, p, q, h, l, turn, big, x
    if m == 1:
        return 0.0
    if m == 2:
        return -split_cost(jet, members, m, 2)
    t = mass2(jet, members, m, 0, 0)
    if t < jet.t_cut:
        return -INFINITY
    log_t = log(t)
    negative = negative_part(jet, members, m)
    if not node_masses(jet, members, m, low, single):
        return -INFINITY
    for k in range(2, m):
        log_low[k] = log(low[k])
    z_in[1] = 0.0
    z_with[1] = -jet.log_norm
    cherry = log1p(-exp(-jet.lam * jet.t_cut / low[2])) - jet.log_norm
    z_in[2] = 2 * cherry - log_4pi
    z_with[2] = jet.kappa - log_low[2] + z_in[2]
    for k in range(3, m + 1):
        total_in = total_with = -INFINITY
        for p in range(1, k // 2 + 1):
            q = k - p
            count = lgamma(k + 1.0) - lgamma(p + 1.0) - lgamma(q + 1.0)
            if p == q:
                count -= M_LN2
            best_in = best_with = -INFINITY
            for turn in range(2):
                # Which part is the heavier, h points.
                h, l = (q, p) if turn == 0 else (p, q)
                if h < 2 or (turn == 1 and p == q):
                    continue
                big = h if low[h] >= low[l] else l
                if k < m:
                    heavy = inner_max(jet, low[k], log_low[k], low[big], log_low[big]) + z_in[h]
                else:
                    heavy = root_heavy(jet, t, log_t, low[big]) + z_in[h]
                heavy = min(heavy, z_with[h])
                value = heavy + z_with[l] - log_4pi
                best_in = max(best_in, value)
                if k < m:
                    best_with = max(best_with, value + jet.kappa - log(
                        split_mass(low, single, negative, k, h, l)))
            total_in = log_add(total_in, count + best_in)
            total_with = log_add(total_with, count + best_with)
        z_in[k] = total_in
        z_with[k] = total_with
    return z_in[m]


cdef inline double root_heavy(const GinkgoJet* jet, double t_root, double log_t_root,
                              double t_low) noexcept nogil:
    """g(t_S, t) at its largest over t >= t_low (``log_t_root``: log t_S)."""
    return jet.log_lam - log_t_root - jet.lam * t_low / t_root - jet.log_norm


cdef inline double root_heavy_within(const GinkgoJet* jet, double tau_low, double tau_high,
                                     double t_low) noexcept nogil:
    """g(tau, t) at its largest over t >= t_low and tau_low <= tau <= tau_high.

    For a fixed tau g decreases in t; ``log(lam / tau) - lam t / tau``
    rises in tau up to ``tau = lam t`` and falls after it.
    """
    cdef double tau = jet.lam * t_low
    if tau < tau_low:
        tau = tau_low
    if tau > tau_high:
        tau = tau_high
    return root_heavy(jet, tau, log(tau), t_low)


cdef double split_term_upper(const GinkgoJet* jet, double t_root, double log_t_root,
                             const int* size, const double* t_low,
                             const double* t_high) noexcept nogil:
    """The largest log psi of a split of S into parts of ``size[0]`` and ``size[1]`` points.

    Over every split whose parts' t lie in [t_low, t_high] (a single point:
    0, a leaf), with ``t_root`` = t_S (``log_t_root`` its log; the sides'
    docstring): either part
    of two or more points may be the heavier, c, if it can outweigh the
    other, o; then ``g(t_S, t_c) <= g(t_S, max(t_low))``; a leaf o has
    ``tau = (sqrt t_S - sqrt t_c)**2`` at least its value at ``t_high[c]``
    (its term falls with tau), an inner o the same tau between that and
    its value at ``max(t_low)`` (``t_c <= t_S``), and ``g(tau, t_o) <=
    g(tau, t_low[o])`` at its peak over tau in that range
    (``root_heavy_within``).
    """
    cdef double best = -INFINITY, heavy, light, t_heavy, scale, least, root = sqrt(t_root)
    cdef double low[2]
    cdef int c, o
    # A part of two or more points of a tree of non-zero likelihood is a
    # node: its t reaches the cut (whatever the widened ranges say).
    for c in range(2):
        low[c] = max(t_low[c], jet.t_cut) if size[c] >= 2 else t_low[c]
    for c in range(2):
        o = 1 - c
        if size[c] < 2 or (size[o] >= 2 and t_high[c] < low[o]):
            continue
        t_heavy = max(low[c], low[o])
        heavy = root_heavy(jet, t_root, log_t_root, t_heavy)
        if size[o] == 1:
            scale = root - sqrt(min(max(t_high[c], 0.0), t_root))
            scale *= scale
            light = -jet.log_norm
            if scale > 0.0:
                light += log1p(-exp(-jet.lam * jet.t_cut / scale))
        else:
            scale = root - sqrt(min(max(t_heavy, 0.0), t_root))
            # tau at least its value with c at its heaviest, as for a leaf.
            least = root - sqrt(min(max(t_high[c], 0.0), t_root))
            light = root_heavy_within(jet, least * least, max(scale * scale, low[o]), low[o])
        best = max(best, heavy + light - log(4 * M_PI))
    return best


cdef inline double heavy_child(const GinkgoJet* jet, const double* low, const double* log_low,
                               const double* with_term, const double* inside,
                               int k, int h, int l) noexcept nogil:
    """Bound on term + subtree of the heavier child (h points) of a node of k = h + l."""
    # t_c >= L_h and >= t of the lighter child >= L_l; tau = t_v >= L_k.
    cdef int big = h if low[h] >= low[l] else l
    cdef double value = inner_max(jet, low[k], log_low[k], low[big], log_low[big]) + inside[h]
    return value if value < with_term[h] else with_term[h]



cdef void subset_masses(const GinkgoJet* jet, const int* members, int m, double* sums,
                        double* t, double* root) noexcept nogil:
    """t and sqrt(max(t, 0)) of every subset of ``members`` (bit k <=> members[k]).

    ``sums`` is scratch of 4 * 2**m doubles. Each subset's four-momentum
    is its subset without its highest bit plus that point, so its points
    are summed in the order of ``members`` from 0.0, as ``mass2`` sums
    them for sorted members (and ``subset_sums`` for the trellis): the
    same t bit for bit, so the same split costs.
    """
    cdef Py_ssize_t x, n_subsets = (<Py_ssize_t>1) << m, previous
    cdef int high = 0, c
    cdef double* total
    sums[0] = sums[1] = sums[2] = sums[3] = 0.0
    t[0] = root[0] = 0.0
    for x in range(1, n_subsets):
        if x >> (high + 1):
            high += 1
        previous = x ^ ((<Py_ssize_t>1) << high)
        total = &sums[4 * x]
        for c in range(4):
            total[c] = sums[4 * previous + c] + jet.p4[4 * members[high] + c]
        if previous == 0:
            # Leaves are massless in the model, whatever rounding says.
            t[x] = 0.0
        else:
            t[x] = (total[0] * total[0] - total[1] * total[1] - total[2] * total[2]
                    - total[3] * total[3])
        root[x] = sqrt(max(t[x], 0.0))


###############################################################################
# lower(S) remembered by cluster mask

cdef enum:
    # GinkgoBound remembers lower(S) of clusters of at least this many points
    # (below, recomputing costs about as much as a look-up) ...
    MEMO_MIN_SIZE = 5
    # ... in a table of at most 2**MEMO_MAX_LOG2 slots (16 bytes each, 256 MiB).
    MEMO_MAX_LOG2 = 24
    MEMO_START_LOG2 = 12


cdef inline uint64_t mix_bits(uint64_t x) noexcept nogil:
    """splitmix64's finaliser: spreads a cluster mask over the table's slots."""
    x ^= x >> 30
    x *= <uint64_t>0xbf58476d1ce4e5b9
    x ^= x >> 27
    x *= <uint64_t>0x94d049bb133111eb
    return x ^ (x >> 31)


cdef struct MaskMemo:
    # ``lower`` remembers its value for every cluster of at least
    # MEMO_MIN_SIZE points here (past the largest table it computes again):
    # a split generator asks for the bound of both parts of each of a
    # cluster's 2**(|S| - 1) splits, and every subset is a part of a split
    # of each of its supersets.
    # Open addressing, linear probing, key 0 empty; at most half full.
    uint64_t* keys
    double* values
    size_t slots, used


cdef bint memo_start(MaskMemo* memo) noexcept nogil:
    """An empty table of 2**MEMO_START_LOG2 slots; False out of memory."""
    memo.slots = (<size_t>1) << MEMO_START_LOG2
    memo.used = 0
    memo.keys = <uint64_t*>calloc(memo.slots, sizeof(uint64_t))
    memo.values = <double*>calloc(memo.slots, sizeof(double))
    return memo.keys != NULL and memo.values != NULL


cdef void memo_free(MaskMemo* memo) noexcept nogil:
    free(memo.keys)
    free(memo.values)


cdef size_t memo_slot(const MaskMemo* memo, uint64_t mask) noexcept nogil:
    """The slot holding ``mask``, or the empty slot where it would go."""
    cdef size_t slot = <size_t>mix_bits(mask) & (memo.slots - 1)
    while memo.keys[slot] != 0 and memo.keys[slot] != mask:
        slot = (slot + 1) & (memo.slots - 1)
    return slot


cdef bint memo_grow(MaskMemo* memo) noexcept nogil:
    """Double the table; False at its largest or out of memory (the table is kept)."""
    cdef MaskMemo grown
    cdef size_t k, slot
    grown.slots = 2 * memo.slots
    grown.used = memo.used
    if grown.slots > (<size_t>1) << MEMO_MAX_LOG2:
        return False
    grown.keys = <uint64_t*>calloc(grown.slots, sizeof(uint64_t))
    grown.values = <double*>calloc(grown.slots, sizeof(double))
    if grown.keys == NULL or grown.values == NULL:
        memo_free(&grown)
        return False
    for k in range(memo.slots):
        if memo.keys[k] != 0:
            slot = memo_slot(&grown, memo.keys[k])
            grown.keys[slot] = memo.keys[k]
            grown.values[slot] = memo.values[k]
    memo_free(memo)
    memo[0] = grown
    return True


cdef void memo_store(MaskMemo* memo, uint64_t mask, double value) noexcept nogil:
    """Remember ``value`` for ``mask`` (not yet stored); silently not past the largest table."""
    cdef size_t slot
    if 2 * (memo.used + 1) > memo.slots and not memo_grow(memo):
        return
    slot = memo_slot(memo, mask)
    memo.keys[slot] = mask
    memo.values[slot] = value
    memo.used += 1


###############################################################################
# The sides' tables remembered by widest set

cdef enum:
    # GinkgoBound keeps the tables of the last widest sets its sides' keys
    # saw in at most this many slots (2**12, about 2.6 KB each: 11 MB), by
    # mask, made at its first sides' key (``kept_side_tables``). At
    # 25 particles 45 % of the look-ups find their tables (37 % with 2**10
    # slots, 51 % with 2**14).
    SIDE_TABLES_LOG2 = 12


cdef struct SideTables:
    # The sides' keys keep the tables of the widest sets they saw last
    # (``reuse_side_tables``): a child shares one widest set with its parent
    # (the point just assigned leaves the other side's), and the same values
    # come back bit for bit.
    # The widest set (0: an empty slot) and ``subtree_tables``' answer over it.
    uint64_t mask
    bint feasible
    double negative
    # lower(W), from the tables (``root_value`` at t_W); NaN until asked.
    double lower
    double low[MAX_SEARCH_POINTS + 1]
    double log_low[MAX_SEARCH_POINTS + 1]
    double single[MAX_SEARCH_POINTS + 1]
    double inside[MAX_SEARCH_POINTS + 1]
    double with_term[MAX_SEARCH_POINTS + 1]


cdef void side_tables(const GinkgoJet* jet, SideTables* tables, const int* widest, int m,
                      uint64_t mask) noexcept nogil:
    """Fill ``tables`` with those of the widest set ``widest`` (m >= 3 points, ``mask``)."""
    tables.mask = mask
    tables.lower = NAN
    tables.feasible = subtree_tables(jet, widest, m, tables.low, tables.log_low, tables.single,
                                     &tables.negative, tables.inside, tables.with_term)


###############################################################################
# The bound


cdef class GinkgoBound(SearchBound):
    """An upper bound on the Ginkgo log likelihood of any tree over a cluster.

    Write ``n = log(1 - exp(-lam))`` (< 0), ``g(tau, t)`` the child term of
    :class:`~sktrellis.energies.GinkgoLikelihood`, ``t_C`` the mass squared
    of a set C of points and
    ``t_ij = 2 p_i.p_j = t_{ij} - t_i - t_j``, so that ``t_C = sum over i in
    C of t_i + sum over pairs i < j in C of t_ij`` (bilinearity; the points'
    own ``t_i`` are 0 up to rounding; only their negative part, summed over
    S less ``1e-12 E_S**2`` for rounding (``negative_part``), is kept, as
    ``neg <= 0``). Inner nodes are future-directed and timelike: two inner
    children have ``sqrt t_v >= sqrt t_a + sqrt t_b`` (reverse
    Cauchy-Schwarz), so ``t_v >= t_a`` and the lighter's scale ``t_v' =
    (sqrt t_v - sqrt t_a)**2 >= t_b``. A leaf x may be 1e-9 spacelike (as
    the energy accepts): beside a child c, ``t_v - t_c = t_x + sum over j in
    c of t_xj >= -s`` (``_leaf_slack``, with a margin for rounding that also
    covers two inner children), so a nearly collinear x can make v lighter
    than c. A child's tau (t_v for the heavier) is at least ``t_c - s >= c0
    t_c``, ``c0 = 1 - s / t_cut`` (inner ``t_c >= t_cut``).

    **Least mass of a node of k points, L_k** (a tree of non-zero
    likelihood over S, every inner node v has ``t_v >= t_cut``):

    - ``2 (t_v - sum of its t_i) = sum over i in v of sum over j in v - i
      of t_ij >= sum over i in v of r_i(k - 1)``, with ``r_i(q)`` the sum
      of the q smallest ``t_ij``, j in S: at least the sum of the k smallest
      ``r_i(k - 1)`` over i in S (the q smallest of a subset's row are no
      smaller than those of S's row);
    - by the node's split into children of h >= l points: with l = 1 (leaf
      x), ``t_v = t_a + t_x + sum over j in a of t_xj >= L_{k-1} + neg +
      R_{k-1}`` (``t_x >= neg``), ``R_q = min over x in S of r_x(q)``;
      with h, l >= 2 (two inner children),
      ``t_v >= (sqrt L_h + sqrt L_l)**2 + neg`` (neg for rounding). Call
      this ``ell(k, h, l)``;
    - by the cut, for k = 2, 3, 4: a node is a set whose own t reaches
      t_cut and that splits into parts that are nodes or single points
      (its subtree has non-zero likelihood), so L_k is at least the least t
      of the jet's k-nodes inside S. They are enumerated once per jet and
      sorted by t (``_small_nodes``, with a margin of 1e-12 of the squared
      energy for rounding against the likelihood's own sums); a cluster
      takes the first inside it, or, after 256 without one, the t of the
      next (no k-node of S is lighter). If S holds no 2-node, no tree over
      it has a non-zero likelihood (every tree has a cherry): ``lower(S) =
      +inf``, ``log_z_upper(S) = -inf``. Where the cut forbids the lightest
      pairs (collinear particles) this raises L_2 to L_4 well above t_cut,
      and every L_k above them through ell;
    - L_k is the largest of ``t_cut``, the first bound + neg, the cut's
      bound (k <= 4) and the least ``ell(k, h, k - h)`` over the splits
      (each is a bound for every node of k points; L_1 = 0).

    **The terms by sizes.** A child c with ``t_c >= L``: ``g(tau, t_c) =
    log(lam / tau) - lam t_c / tau - n`` decreases in ``t_c`` and, over
    ``tau >= max(c0 t_c, T)``, peaks at ``tau = max(c t_c, T)``, ``c =
    max(lam, c0)`` (lam for lam >= 1, whatever s; for lam < 1 near 1 where
    the cut is far above s, and down to g's own peak, lam, where it is not):
    ``g <= I(T, L)``, its value at ``t_c = L`` and that tau; ``I(0, L) =
    kappa - log L``, ``kappa = log(lam / c) - lam / c - n``.
    A leaf child: ``g = log(1 - exp(-lam t_cut / tau)) - n <= -n``; in a
    cherry both leaves have ``tau = t_v`` (``t_v' = t_v`` as ``t_a = 0``),
    and g decreases in tau: ``<= log(1 - exp(-lam t_cut / L_2)) - n``.
    An inner child is the heavier (inner t >= t_cut > 0); of two inner
    children either may be, so both are tried, and the heavier has ``t_c >=
    max(L_h, L_l)`` (it outweighs the other) and ``tau = t_v >= L_k``.

    **Dynamic programme over the sizes.** For a non-root node of k points,
    ``inside(k)`` bounds the log potential of its subtree, ``with(k)`` that
    plus its own term when it is a lighter child: ``with(1) = -n``,
    ``inside(2) = 2 log(1 - exp(-lam t_cut / L_2)) - 2 n - log(4 pi)``,
    ``with(2) = I(0, L_2) + inside(2)`` and, for k >= 3, over h + l = k,
    h >= 2 the heavier, ``inside(k) = max [heavy(k, h, l) + with(l)] -
    log(4 pi)`` and ``with(k)`` the same max with ``I(0, ell(k, h, l))``
    added inside it (the node's own term, given its split), where the
    heavier child's term and subtree are at most ``heavy(k, h, l) =
    min(with(h), I(L_k, max(L_h, L_l)) + inside(h))`` (the max over its
    splits of a min is at most the min of the maxes). At the root S the
    heavier child c (h points) has ``tau = t_S`` exactly, so for each split
    h1 + h2 = h of c (h1 >= 2 the heavier) its term is at most
    ``log(lam / t_S) - lam t / t_S - n`` with ``t = max(ell(h, h1, h2),
    L_l)``, and its subtree at most ``heavy(h, h1, h2) + with(h2) - log(4
    pi)`` (a cherry: L_2 and inside(2)); the root's value is the max over
    h + l = |S| of that max over c's splits + ``with(l) - log(4 pi)``. By
    induction every tree's log potential is at most the root's value
    (each bound holds for the tree's own sizes); ``lower(S)`` is minus it,
    +inf when ``t_S < t_cut``, exact for one and two points. It costs
    O(|S|**2) steps and O(|S|**3) comparisons (small sorts); a node's own
    term takes a log only where its split could still give ``with(k)``
    (``ell >= L_k``).

    The bound knows the sizes of the nodes, not which points they hold: it
    lets disjoint nodes of one size share the lightest points and pays each
    node's ``g`` at its best tau. A split's parts it sees only through
    their own bounds, and a partial split through its sides' points
    (below).

    **By the size of the smaller side** (``size_classes``). The root's
    value is a max over the size h of its heavier child; a split whose
    smaller side has p points has its heavier child of p or |S| - p points
    (p >= 2 for the former: only an inner child can be the heavier), so
    minus the larger of those two values bounds every tree whose top split
    is in that class. Without the sides' key (``use_sides_bound(False)``)
    the split generator enumerates the classes in that order.

    **By the sides** (``partial_key_``, the default; ``use_sides_bound``).
    A partial split of S puts the points F_A on side A, F_B on side B and
    leaves the rest free: a split completing it has ``F_X <= X <= W_X``
    (W_X: S less the other side's F) and ``|A| + |B| = |S|``. Take each size
    a of A (and |S| - a of B). A side that is F_X or W_X is known: its
    ``lower``. Otherwise every node of X's trees lies in W_X, so W_X's
    L_k, R_q, neg, inside(k) and with(k) bound them (each holds for any
    node of k points of W_X; the programme's values only rise with the L_k,
    so a subset's own are no smaller), and the root's heavier child has
    ``tau = t_X``, at least t_cut and L_a and within the range of t over
    F_X and q = a - |F_X| free points (``free_gains``: t_{F_X} plus the q
    least gains, t_{W_X} less the r - q least, if >= 0): its term is at most g
    at its peak over that range of tau (``root_heavy_within``), with the
    heavier child's t at least ``max(L_h, L_l)`` (``loose_root_value``:
    ``ell >= L_h``); a pair: both leaves' terms fall with its t. This is at
    most ``lower(X)``. The split's own term (``split_term_upper``): the
    heavier part c (two or more points, able to outweigh the other, o) has
    ``g(t_S, t_c) <= g(t_S, max(t_low))``; a leaf o has ``tau >= (sqrt t_S
    - sqrt t_high(c))**2``, and its term falls with tau; an inner o has
    ``t_o >= t_low(o)`` and ``(sqrt t_S - sqrt t_high(c))**2 <= tau <=
    (sqrt t_S - sqrt max(t_low))**2``, so its term is at most g's peak over
    tau in that range. The key, the least over a of both sides'
    bounds less the split's, is at most the cost of every tree over S whose
    root split completes the partial one (not always at most ``split_cost
    + lower(A) + lower(B)``: a side's t range excludes masses no tree over
    it reaches, which ``lower`` of a part without a feasible tree may
    not). The t ranges, the least node masses included, are widened by
    ``1e-8 E_S**2`` (rounding, and points up to 1e-9 spacelike). The generator assigns the
    softest points first (``order_``; split costs are summed in index order
    all the same) and keys each partial state by the larger of this and its
    parent's key, best first.

    A bound remembers what it computed (``lower`` by cluster, the sides'
    tables by widest set: ``MaskMemo``, ``SideTables``), so it must not be
    shared by searches running in different threads.

    **The partition function** (``log_z_upper``). Every bound above holds
    for any node of the given sizes, whatever its points, so the same
    programme with sums over splits in place of maxima bounds ``Z(S)``, the
    sum over every tree over S of its likelihood: the subtrees of a set of k
    points are the products of the subtrees of its two parts over its
    unordered splits, ``C(k, p)`` of them into parts of p > q points and
    ``C(k, p) / 2`` for p = q. A split's term, its parts' terms and
    subtrees summed, is at most ``exp(-log(4 pi))`` times the larger, over
    which part is the heavier (only an inner part can be), of ``Zheavy(k,
    h, l) * Zwith(l)``, with ``Zheavy = min(Zwith(h), exp(I(L_k, max(L_h,
    L_l))) Zin(h))`` (the heavier child's term is bounded whatever its
    subtree); ``Zwith(k)`` adds the node's own term ``I(0, ell(k, h,
    l))``; ``Zin(1) = 1``, ``Zwith(1) = exp(-n)``, and for two points the
    cherry bounds. At the root the heavier child has ``tau = t_S``, so its
    term is at most ``log(lam / t_S) - lam max(L_h, L_l) / t_S - n``.
    ``log_z_upper(S)`` is the log of the root's sum, exact for one and two
    points, ``-inf`` when ``t_S < t_cut``; it replaces the count of trees
    times the best tree's bound, which the search would use otherwise.

    Parameters
    ----------
    momenta : ndarray of shape (n, 4)
        Four-momenta (E, px, py, pz), validated.
    lam, t_cut : float
        Parameters of :class:`~sktrellis.energies.GinkgoLikelihood`.
    exact_size : int, default=12
        Clusters of at most this many points are solved exactly (the bound
        would have the search enumerate their splits anyway), every subset
        at once by the trellis's Ginkgo kernel where the search knows few
        of them yet (``solve_subsets_``).
    """


    cdef readonly object momenta, pair_mass, point_mass, pair_order
    cdef readonly double lam, t_cut
    cdef readonly list small_nodes
    cdef GinkgoJet jet
    cdef MaskMemo memo
    # The sides' keys' tables by widest set (``kept_side_tables``) in
    # side_slots slots, NULL (0) until the first key or if not kept.
    cdef SideTables* side_cache
    cdef bint keeps_side_tables
    cdef readonly size_t side_slots
    # Sides' keys computed (``partial_key_``), for the benchmarks' rates.
    cdef readonly long long n_partial_keys
    # Scratch of the exact solves by the trellis kernel, SUBSET_SCRATCH
    # doubles per subset of the largest cluster solved so far (NULL before).
    cdef double* subset_scratch
    cdef int scratch_points

    def __cinit__(self):
        # On failure __dealloc__ frees what was allocated.
        if not memo_start(&self.memo):
            raise MemoryError("GinkgoBound: no memory for its table of cluster bounds")

    def __dealloc__(self):
        memo_free(&self.memo)
        free(self.subset_scratch)
        free(self.side_cache)

    def __init__(self, momenta, double lam, double t_cut, int exact_size=12):
        momenta = np.ascontiguousarray(momenta, dtype=np.float64)
        cdef const float64_t[:, ::1] view = momenta
        self.momenta = momenta
        self.jet.n = momenta.shape[0]
        self.jet.p4 = &view[0, 0] if self.jet.n else NULL
        # t_ij = 2 p_i.p_j = t({i, j}) - t_i - t_j, and the points' own t_i.
        energy, p = momenta[:, 0], momenta[:, 1:]
        pair_mass = np.ascontiguousarray(2.0 * (np.outer(energy, energy) - p @ p.T))
        np.fill_diagonal(pair_mass, 0.0)
        point_mass = np.ascontiguousarray(energy ** 2 - np.sum(p ** 2, axis=1))
        cdef const float64_t[:, ::1] pair_view = pair_mass
        cdef const float64_t[::1] point_view = point_mass
        self.pair_mass, self.point_mass = pair_mass, point_mass
        self.jet.pair_t = &pair_view[0, 0] if self.jet.n else NULL
        self.jet.self_t = &point_view[0] if self.jet.n else NULL
        # A cluster's rows of pair masses in order are these, less the points
        # outside it (node_masses): no sort per cluster.
        pair_order = np.ascontiguousarray(np.argsort(pair_mass, axis=1, kind="stable"),
                                          dtype=np.intc)
        cdef const int[:, ::1] order_view = pair_order
        self.pair_order = pair_order
        self.jet.pair_order = &order_view[0, 0] if self.jet.n else NULL
        self.lam, self.t_cut = lam, t_cut
        self.jet.lam, self.jet.t_cut = lam, t_cut
        for k, value in enumerate(ginkgo_params(lam, t_cut)):
            self.jet.params[k] = value
        self.jet.log_lam = self.jet.params[LOG_LAM]
        self.jet.log_norm = self.jet.params[LOG_NORM]
        # I(0, L) = kappa - log L: g(tau, L) at tau = c L (the class docstring).
        cdef double c = max(lam, 1.0 - _leaf_slack(momenta, pair_mass, point_mass) / t_cut)
        self.jet.peak = c
        self.jet.kappa = self.jet.log_lam - log(c) - lam / c - self.jet.log_norm
        self.scale = 0.0
        # The split order comes from the complete split's own bound.
        self.refine = True
        self.bounds_log_z = True
        self.sees_sides = sides_bound_enabled
        self.keeps_side_tables = self.sees_sides and side_tables_reused
        if not 0 <= exact_size <= MAX_EXACT_POINTS:
            raise ValueError(
                f"exact_size must be 0 to {MAX_EXACT_POINTS} (3**k / 2 splits per cluster), "
                f"got {exact_size}")
        self.exact_size = exact_size
        self.small_nodes = _small_nodes(momenta, t_cut, SMALL_NODE_SIZE)
        cdef const uint64_t[::1] masks
        cdef const float64_t[::1] lows
        for k, (masks, lows) in enumerate(self.small_nodes, start=2):
            self.jet.node_count[k] = masks.shape[0]
            self.jet.node_mask[k] = &masks[0] if masks.shape[0] else NULL
            self.jet.node_low[k] = &lows[0] if lows.shape[0] else NULL

    cdef double split_cost_(self, const int* members, int m, uint64_t sides) noexcept nogil:
        return split_cost(&self.jet, members, m, sides)

    cdef double lower_(self, const int* members, int m) noexcept nogil:
        # The search asks for the same clusters again and again (a subset is
        # a part of a split of each of its supersets): remembered by mask.
        cdef uint64_t mask = 0
        cdef size_t slot
        cdef double value
        cdef int x
        if m < MEMO_MIN_SIZE:
            return size_programme(&self.jet, members, m, NULL)
        for x in range(m):
            mask |= (<uint64_t>1) << members[x]
        slot = memo_slot(&self.memo, mask)
        if self.memo.keys[slot] == mask:
            return self.memo.values[slot]
        value = size_programme(&self.jet, members, m, NULL)
        memo_store(&self.memo, mask, value)
        return value

    cdef double log_z_upper_(self, const int* members, int m) noexcept nogil:
        return log_z_upper(&self.jet, members, m)

    cdef void order_(self, int* members, int m) noexcept nogil:
        # Seeing the sides, the softest points first: the sides' keys rise
        # after fewer of them (measured in benchmarks/README.md).
        cdef int x, z, moving
        if not self.sees_sides:
            return
        for x in range(1, m):
            moving = members[x]
            z = x
            while z > 0 and self.jet.p4[4 * members[z - 1]] > self.jet.p4[4 * moving]:
                members[z] = members[z - 1]
                z -= 1
            members[z] = moving

    cdef double partial_key_(self, const int* members, int m, uint64_t sides,
                             int n_assigned) noexcept nogil:
        self.n_partial_keys += 1
        return sides_key(self, members, m, sides, n_assigned)

    cdef bint size_classes_(self, const int* members, int m, double* keys) noexcept nogil:
        return size_class_keys(&self.jet, members, m, keys)

    cdef int solve_subsets_(self, const int* members, int m, double* log_z, double* log_map,
                            mask_t* best_left) except -1 nogil:
        return solve_subsets(self, members, m, log_z, log_map, best_left)


cdef void free_gains(const GinkgoJet* jet, const int* fixed, int n_fixed, const int* free,
                     int n_free, double* prefix) noexcept nogil:
    """``prefix[q]``: the sum of the q least gains ``d_x = t_x + 2 p_F.p_x`` of the free points.

    F is side X's fixed points, R the r free ones, and X = F + Q with Q q
    of them. By bilinearity ``t_X = t_F + sum over x in Q of d_x + sum over
    pairs of Q of t_xy``, and ``t_W = t_X + sum over y in R - Q of d_y +
    the t_yz of those y with each other and with Q`` (W = F + R). Every
    ``t_x`` and ``t_xy`` is at least 0 for causal momenta, so ``t_F +
    max(prefix[q], 0) <= t_X <= t_W - max(prefix[r - q], 0)``; the energy
    accepts points up to 1e-9 spacelike, and their negative parts, all
    together at most about ``4e-9 E_S**2``, with rounding, are what
    ``sides_key``'s margin of ``1e-8 E_S**2`` on both ends covers.
    """
    cdef double p_fixed[4]
    cdef double gains[MAX_SEARCH_POINTS]
    cdef double value
    cdef int x, y, z, c
    for c in range(4):
        p_fixed[c] = 0.0
    for x in range(n_fixed):
        for c in range(4):
            p_fixed[c] += jet.p4[4 * fixed[x] + c]
    for x in range(n_free):
        y = free[x]
        value = jet.self_t[y] + 2 * (p_fixed[0] * jet.p4[4 * y] - p_fixed[1] * jet.p4[4 * y + 1]
                                     - p_fixed[2] * jet.p4[4 * y + 2]
                                     - p_fixed[3] * jet.p4[4 * y + 3])
        z = x
        while z > 0 and gains[z - 1] > value:
            gains[z] = gains[z - 1]
            z -= 1
        gains[z] = value
    prefix[0] = 0.0
    for x in range(n_free):
        prefix[x + 1] = prefix[x] + gains[x]


cdef bint size_class_keys(const GinkgoJet* jet, const int* members, int m,
                          double* keys) noexcept nogil:
    """``size_classes_``: the root's value by the size h of its heavier child.

    A split whose smaller side has p points has its heavier child of p or
    m - p points (only an inner child can be the heavier, p >= 2).
    """
    cdef double by_heavy[MAX_SEARCH_POINTS + 1]
    cdef double value
    cdef int p
    if m < 3:
        return False
    if not size_programme(jet, members, m, by_heavy) < INFINITY:
        for p in range(1, m // 2 + 1):
            keys[p] = INFINITY
        return True
    for p in range(1, m // 2 + 1):
        value = by_heavy[m - p]
        if p >= 2 and by_heavy[p] > value:
            value = by_heavy[p]
        keys[p] = -value
    return True


cdef double sides_key(GinkgoBound bound, const int* members, int m, uint64_t sides,
                      int n_assigned) noexcept nogil:
    """``partial_key_``: the sides' bound of the class docstring.

    Side X holds its fixed points (``fixed``) and some of the free ones, so
    it lies inside ``widest`` (its fixed points and the free ones).
    """
    cdef int fixed[2][MAX_SEARCH_POINTS]
    cdef int widest[2][MAX_SEARCH_POINTS]
    cdef int whole[MAX_SEARCH_POINTS]
    cdef int free[MAX_SEARCH_POINTS]
    cdef double prefix[MAX_SEARCH_POINTS + 1]
    cdef uint64_t fixed_mask[2]
    cdef uint64_t free_mask
    cdef int n_fixed[2]
    cdef int n_widest[2]
    cdef int size[2]
    cdef double sub[2][MAX_SEARCH_POINTS + 1]
    cdef double t_low[2][MAX_SEARCH_POINTS + 1]
    cdef double t_high[2][MAX_SEARCH_POINTS + 1]
    # The widest set's tables: kept by the bound, or these.
    cdef SideTables fresh
    cdef SideTables* tab
    cdef double pair_low[2]
    cdef double pair_high[2]
    cdef double t_root, log_root, energy = 0.0, margin, t_fixed, t_widest, value, key = INFINITY
    cdef double log_4pi = log(4 * M_PI)
    cdef uint64_t widest_mask
    cdef bint tables
    cdef int x, side, a, b, n0, top, n_free, q, rest
    fixed_mask[0] = fixed_mask[1] = free_mask = 0
    for x in range(m):
        energy += bound.jet.p4[4 * members[x]]
        if x < n_assigned:
            fixed_mask[side_of(sides, x)] |= (<uint64_t>1) << members[x]
        else:
            free_mask |= (<uint64_t>1) << members[x]
    # Sorted, so that their sums and bounds are those of the sorted sets.
    for side in range(2):
        n_fixed[side] = members_of(fixed_mask[side], fixed[side])
        n_widest[side] = members_of(fixed_mask[side] | free_mask, widest[side])
    members_of(fixed_mask[0] | fixed_mask[1] | free_mask, whole)
    n_free = members_of(free_mask, free)
    t_root = mass2(&bound.jet, whole, m, 0, 0)
    if t_root < bound.jet.t_cut:
        return INFINITY
    log_root = log(t_root)
    # Rounding (and points up to 1e-9 spacelike, as the energy accepts)
    # moves a sum's t by far less than this: the t ranges are widened by it.
    margin = 1e-8 * energy * energy
    for side in range(2):
        n0, top = n_fixed[side], min(n_widest[side], m - 1)
        t_fixed = mass2(&bound.jet, fixed[side], n0, 0, 0) if n0 else 0.0
        t_widest = mass2(&bound.jet, widest[side], n_widest[side], 0, 0)
        tables = False
        if n_widest[side] >= 3 and max(n0 + 1, 2) <= top:
            # Sizes above the fixed points': the tables of the widest set,
            # shared by every state whose other side has the same fixed
            # points (a child with its parent).
            widest_mask = fixed_mask[side] | free_mask
            tab = kept_side_tables(bound, widest_mask)
            if tab != NULL:
                if tab.mask != widest_mask:
                    side_tables(&bound.jet, tab, widest[side], n_widest[side], widest_mask)
            else:
                tab = &fresh
                side_tables(&bound.jet, tab, widest[side], n_widest[side], widest_mask)
            tables = tab.feasible
        if max(n0 + 1, 2) <= top:
            free_gains(&bound.jet, fixed[side], n0, free, n_free, prefix)
        for a in range(max(n0, 1), top + 1):
            if a == 1:
                sub[side][a] = t_low[side][a] = t_high[side][a] = 0.0
                continue
            if a == n0 or a == n_widest[side]:
                # The side is the fixed points, or all but the other's.
                value = t_fixed if a == n0 else t_widest
                t_low[side][a], t_high[side][a] = value - margin, value + margin
                if a == n0:
                    sub[side][a] = bound.lower_(fixed[side], a)
                elif a == 2:
                    sub[side][a] = bound.lower_(widest[side], a)
                elif tables and t_widest >= bound.jet.t_cut:
                    # lower(W_X), from the tables at hand (as size_programme).
                    if isnan(tab.lower):
                        tab.lower = -root_value(&bound.jet, tab.low, tab.log_low, tab.single,
                                                tab.negative, tab.inside, tab.with_term, a,
                                                t_widest, NULL)
                    sub[side][a] = tab.lower
                else:
                    sub[side][a] = INFINITY
                continue
            # The side adds q of the free points to F and leaves the rest:
            # its t is t_F plus their gains and their t_xy, and t_W less the
            # others' gains and their t_xy with the rest of W (free_gains).
            q, rest = a - n0, n_free - (a - n0)
            t_low[side][a] = max(t_fixed + max(prefix[q], 0.0) - margin, bound.jet.t_cut)
            t_high[side][a] = t_widest - max(prefix[rest], 0.0) + margin
            if not tables or t_high[side][a] < bound.jet.t_cut:
                sub[side][a] = INFINITY
                continue
            # node_masses' least k-node mass has no margin of its own.
            t_low[side][a] = max(t_low[side][a], tab.low[a] - margin)
            if t_low[side][a] > t_high[side][a]:
                sub[side][a] = INFINITY
            elif a == 2:
                # A cherry: both leaves' terms fall with its t.
                sub[side][a] = log_4pi - 2 * (
                    log1p(-exp(-bound.jet.lam * bound.jet.t_cut / t_low[side][a]))
                    - bound.jet.log_norm)
            else:
                sub[side][a] = -loose_root_value(&bound.jet, tab.low, tab.log_low, tab.inside,
                                                 tab.with_term, a, t_low[side][a],
                                                 t_high[side][a])
    for a in range(max(n_fixed[0], 1), min(n_widest[0], m - 1) + 1):
        b = m - a
        if b < max(n_fixed[1], 1) or b > n_widest[1]:
            continue
        value = sub[0][a] + sub[1][b]
        if value == INFINITY:
            continue
        size[0], size[1] = a, b
        pair_low[0], pair_low[1] = t_low[0][a], t_low[1][b]
        pair_high[0], pair_high[1] = t_high[0][a], t_high[1][b]
        value -= split_term_upper(&bound.jet, t_root, log_root, size, pair_low, pair_high)
        if value < key:
            key = value
    return key


cdef SideTables* kept_side_tables(GinkgoBound bound, uint64_t mask) noexcept nogil:
    """The slot of the bound's sides' tables for the widest set ``mask``; NULL if it keeps none.

    The table is made at the first sides' key, so a bound never asked for
    one (its clusters solved exactly, or the sides not seen) holds none:
    2**min(SIDE_TABLES_LOG2, n) slots (a jet of n points has fewer widest
    sets than 2**n). Out of memory, the keys compute their tables afresh.
    """
    cdef size_t slots
    if bound.side_cache == NULL:
        if not bound.keeps_side_tables:
            return NULL
        slots = (<size_t>1) << min(<Py_ssize_t>SIDE_TABLES_LOG2, bound.jet.n)
        bound.side_cache = <SideTables*>calloc(slots, sizeof(SideTables))
        if bound.side_cache == NULL:
            bound.keeps_side_tables = False
            return NULL
        bound.side_slots = slots
    return &bound.side_cache[mix_bits(mask) & (bound.side_slots - 1)]


cdef int solve_subsets(GinkgoBound bound, const int* members, int m, double* log_z,
                       double* log_map, mask_t* best_left) except -1 nogil:
    """The trellis's Ginkgo kernel (``ginkgo_subset_tables``) over the cluster's subsets.

    Its masses are those ``split_cost_`` computes (``subset_masses``),
    and it takes the best tree's value in log space by the same formula
    (``log_psi_of_masses``), summed in the same order: the same value
    bit for bit; log Z in linear space, within rounding.
    """
    cdef Py_ssize_t n_subsets = (<Py_ssize_t>1) << m, full = n_subsets - 1
    cdef double* sums
    cdef double* t
    cdef double* root
    if m > bound.scratch_points:
        free(bound.subset_scratch)
        bound.scratch_points = 0
        bound.subset_scratch = <double*>malloc(SUBSET_SCRATCH * n_subsets * sizeof(double))
        if bound.subset_scratch == NULL:
            with gil:
                raise MemoryError(f"GinkgoBound: no memory to solve a cluster of {m} points")
        bound.scratch_points = m
    # Four sums, t and its root per subset, then the kernel's records.
    sums = bound.subset_scratch
    t = sums + 4 * n_subsets
    root = t + n_subsets
    subset_masses(&bound.jet, members, m, sums, t, root)
    if t[full] < bound.jet.params[T_CUT]:
        # Every split of the cluster is forbidden (as log_psi_of_masses says).
        log_z[full] = log_map[full] = -INFINITY
        best_left[full] = 1
        return CLUSTER_CANNOT_SPLIT
    ginkgo_subset_tables(bound.jet.params, m, t, root, log_z, log_map, best_left,
                         root + n_subsets)
    return SUBSETS_SOLVED


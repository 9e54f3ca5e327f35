"""Agglomerative tree builders over a merge model: greedy and beam search.

Both build trees bottom-up from the points, ranking candidate merges by the
merge model's ``scores``, the energy's merge score (see
:mod:`sktrellis.energies._merge`). Every
cluster sits in the *slot* of its lowest point -- a merged cluster takes the
lower slot of its two children -- so a forest is a set of arrays of length N
indexed by slot.
"""
from typing import NamedTuple

import numpy as np

from ._agglomerative import row_entries, update_rows

# Scores are computed in blocks of about this many pairs.
_BLOCK_PAIRS = 1 << 20
_MASK64 = (1 << 64) - 1


class AgglomerativeTree(NamedTuple):
    """A tree found by agglomerative search.

    merges : ndarray of shape (N - 1, 2)
        Children first: points are 0..N-1 and merge k is node N + k.
    log_potentials : ndarray of shape (N - 1,)
        log psi of the split each merge creates.
    clusters : ndarray of shape (N - 1,)
        Merge-model id of the cluster each merge creates.
    """

    merges: np.ndarray
    log_potentials: np.ndarray
    clusters: np.ndarray

    @property
    def log_potential(self):
        return float(self.log_potentials.sum())


def _tree_from_steps(n_points, steps):
    """AgglomerativeTree from (a, b, cluster, log psi) merge steps in model ids."""
    node = {i: i for i in range(n_points)}
    merges = np.empty((len(steps), 2), dtype=np.int64)
    for k, (a, b, cluster, _) in enumerate(steps):
        merges[k] = node[a], node[b]
        node[cluster] = n_points + k
    return AgglomerativeTree(
        merges,
        np.array([step[3] for step in steps], dtype=np.float64),
        np.array([step[2] for step in steps], dtype=np.int64),
    )


def _row_blocks(n_rows, n_cols):
    step = max(1, _BLOCK_PAIRS // max(n_cols, 1))
    return [slice(first, first + step) for first in range(0, n_rows, step)]


def _scores(model, rows, cols, noise):
    scores = model.scores(rows, cols)
    return scores if noise is None else scores + noise(rows, cols)


###############################################################################
# Greedy

def greedy_tree(model, noise=None):
    """Merge the best-scoring pair of clusters until one cluster is left.

    Each slot keeps its best partner. After a merge only the new cluster is
    scored against the others (O(N), cross statistics updated incrementally
    by the model); a slot whose best partner was merged away is rescored in
    full. Ties go to the lowest slot.

    Parameters
    ----------
    model : MergeModel
    noise : callable, default=None
        ``noise(rows, cols)`` -> array added to the scores of those pairs of
        cluster ids; must be a fixed function of the pair (randomised runs).

    Returns
    -------
    tree : AgglomerativeTree
    """
    n_points = model.n_points
    cluster = np.arange(n_points, dtype=np.int64)
    alive = np.ones(n_points, dtype=bool)
    best_score = np.empty(n_points)
    best_slot = np.empty(n_points, dtype=np.int64)

    def rescore(slots):
        live = np.flatnonzero(alive)
        for block in _row_blocks(len(slots), len(live)):
            rows = slots[block]
            scores = _scores(model, cluster[rows], cluster[live], noise)
            itself = rows[:, None] == live[None, :]
            scores[itself] = -np.inf
            best = np.argmax(scores, axis=1)
            # A row of impossible merges (-inf) must still name another cluster.
            clash = live[best] == rows
            best[clash] = np.argmin(itself[clash], axis=1)
            best_slot[rows] = live[best]
            best_score[rows] = scores[np.arange(len(rows)), best]

    rescore(np.arange(n_points))
    steps = []
    for _ in range(n_points - 1):
        live = np.flatnonzero(alive)
        first = live[np.argmax(best_score[live])]
        second = best_slot[first]
        keep, gone = min(first, second), max(first, second)
        a, b = int(cluster[first]), int(cluster[second])
        alive[first] = alive[second] = False
        others = np.flatnonzero(alive)
        new, log_psi = model.merge(a, b, cluster[others])
        model.release([a, b])
        steps.append((a, b, new, log_psi))
        cluster[keep], cluster[gone] = new, -1
        alive[keep] = True
        if not others.size:
            break
        scores = _scores(model, np.array([new]), cluster[others], noise)[0]
        best = np.argmax(scores)
        best_score[keep], best_slot[keep] = scores[best], others[best]
        improved = scores > best_score[others]
        # Slots whose best partner was merged away and that the new cluster
        # does not beat must look at everyone again.
        stale = others[~improved & ((best_slot[others] == first) | (best_slot[others] == second))]
        best_score[others[improved]] = scores[improved]
        best_slot[others[improved]] = keep
        if stale.size:
            rescore(stale)
    return _tree_from_steps(n_points, steps)


def gumbel_noise(seed, scale=1.0):
    """Fixed Gumbel(0, scale) noise per pair of cluster ids, drawn from a hash of (pair, seed).

    The same pair always gets the same noise, however often a search
    rescores it, so a perturbed greedy run is a greedy run on perturbed
    scores.
    """
    salt = np.uint64((seed * 0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019) & _MASK64)

    def noise(rows, cols):
        low = np.minimum(rows[:, None], cols[None, :]).astype(np.uint64)
        high = np.maximum(rows[:, None], cols[None, :]).astype(np.uint64)
        x = low * np.uint64(0xBF58476D1CE4E5B9) ^ (high + salt) * np.uint64(0x94D049BB133111EB)
        # splitmix64 finaliser: uniform 64-bit values from structured input.
        x ^= x >> np.uint64(30)
        x *= np.uint64(0xBF58476D1CE4E5B9)
        x ^= x >> np.uint64(27)
        x *= np.uint64(0x94D049BB133111EB)
        x ^= x >> np.uint64(31)
        uniform = ((x >> np.uint64(11)).astype(np.float64) + 0.5) / 2.0**53
        return -scale * np.log(-np.log(uniform))

    return noise


def replay_tree(model, merges):
    """The given tree as an AgglomerativeTree of ``model``: its merges made in order.

    Parameters
    ----------
    model : MergeModel
    merges : ndarray of shape (N - 1, 2)
        Children first: points are 0..N-1 and merge k is node N + k.

    Returns
    -------
    tree : AgglomerativeTree
    """
    n_points = model.n_points
    node = list(range(n_points))
    cluster = np.arange(n_points, dtype=np.int64)
    alive = np.ones(n_points, dtype=bool)
    steps = []
    for first, second in merges:
        a, b = node[first], node[second]
        slot_a, slot_b = int(model.low[a]), int(model.low[b])
        alive[slot_a] = alive[slot_b] = False
        new, log_psi = model.merge(a, b, cluster[alive])
        model.release([a, b])
        steps.append((a, b, new, log_psi))
        node.append(new)
        cluster[min(slot_a, slot_b)] = new
        alive[min(slot_a, slot_b)] = True
    return _tree_from_steps(n_points, steps)


###############################################################################
# Beam search

def _top(scores, k):
    """Indices of the k highest scores, best first, ties to the lower index."""
    if k < len(scores):
        candidates = np.argpartition(-scores, k - 1)[:k] if k else np.empty(0, dtype=np.intp)
        # Include every score tied with the k-th so ties go to the lower index.
        threshold = scores[candidates].min() if k else np.inf
        candidates = np.flatnonzero(scores >= threshold)
    else:
        candidates = np.arange(len(scores))
    return candidates[np.lexsort((candidates, -scores[candidates]))][:k]


def _mix64(value):
    """splitmix64 finaliser: a 64-bit hash of a 64-bit value (Python ints)."""
    value = (value ^ (value >> 30)) * 0xBF58476D1CE4E5B9 & _MASK64
    value = (value ^ (value >> 27)) * 0x94D049BB133111EB & _MASK64
    return value ^ (value >> 31)


class _BeamState:
    """One partial clustering of the beam and its candidate merges.

    ``partner[s]``/``partner_score[s]`` hold, for the cluster in slot s, the
    exact top partners (model ids, -1 for empty entries) among the clusters
    of this forest, up to ``width`` of them and at least one: a *prefix* of
    its partners ranked by score. ``complete[s]`` says the row holds all of
    them. The top ``width`` merges of the forest are then found among the
    rows (exactly when rows are complete; the top one always).
    """

    __slots__ = ("cluster", "alive", "partner", "partner_score", "complete",
                 "score", "key", "history")

    def copy(self):
        other = _BeamState()
        for name in ("cluster", "alive", "partner", "partner_score", "complete"):
            setattr(other, name, getattr(self, name).copy())
        other.score, other.key, other.history = self.score, self.key, self.history
        return other

    def fill_rows(self, model, slots, width):
        """Rows of ``slots`` from scratch: top partners among all live slots."""
        live = np.flatnonzero(self.alive)
        keep = min(width, len(live) - 1)
        for block in _row_blocks(len(slots), len(live)):
            rows = slots[block]
            scores = model.scores(self.cluster[rows], self.cluster[live])
            scores[rows[:, None] == live[None, :]] = np.nan
            # NaN sorts last: the cluster itself is never among the top.
            top = np.argsort(-scores, axis=1, kind="stable")[:, :keep]
            self.partner[rows] = -1
            self.partner_score[rows] = -np.inf
            self.partner[rows, :keep] = self.cluster[live[top]]
            self.partner_score[rows, :keep] = np.take_along_axis(scores, top, axis=1)
            self.complete[rows] = keep == len(live) - 1

    def top_merges(self, model, width):
        """(slot, slot, score) of the best ``width`` merges found in the rows."""
        rows, other, scores = row_entries(
            self.partner, self.partner_score, np.flatnonzero(self.alive), model.low
        )
        # A pair sits in at most two rows, so the best 2 * width entries
        # hold the best width distinct pairs.
        if len(scores) > 2 * width:
            top = np.argpartition(-scores, 2 * width - 1)[: 2 * width]
            rows, other, scores = rows[top], other[top], scores[top]
        first, second = np.minimum(rows, other), np.maximum(rows, other)
        code = first * len(self.alive) + second
        # Best first, ties to the lower pair; one copy of each pair.
        order = np.lexsort((code, -scores))
        _, unique = np.unique(code[order], return_index=True)
        keep = order[np.sort(unique)][:width]
        return first[keep], second[keep], scores[keep]

    def merge(self, model, first, second, width):
        """Merge the clusters of two slots; returns the model's (id, log psi)."""
        keep, gone = min(first, second), max(first, second)
        a, b = int(self.cluster[first]), int(self.cluster[second])
        self.alive[first] = self.alive[second] = False
        others = np.flatnonzero(self.alive)
        new, log_psi = model.merge(a, b, self.cluster[others])
        self.cluster[keep], self.cluster[gone] = new, -1
        self.alive[keep] = True
        self.partner[gone] = -1
        self.partner[keep] = -1
        self.partner_score[keep] = -np.inf
        if not others.size:
            return new, log_psi
        scores = model.scores(np.array([new]), self.cluster[others])[0]
        empty = update_rows(
            self.partner, self.partner_score, self.complete, others, a, b, new, scores
        )
        top = _top(scores, min(width, len(others)))
        self.partner[keep, : len(top)] = self.cluster[others[top]]
        self.partner_score[keep, : len(top)] = scores[top]
        self.complete[keep] = len(top) == len(others)
        if empty.size:
            self.fill_rows(model, empty, width)
        return new, log_psi


def beam_search(model, width, *, keep_greedy=False, distinct="clusters"):
    """The paper's beam search: keep the ``width`` best partial clusterings.

    Every forest proposes its ``width`` best merges; of all proposals the
    ``width`` with the highest total score that give distinct forests
    survive. With ``keep_greedy`` the best merge of the forest on the greedy
    path always survives (in place of the last proposal otherwise kept), so
    the greedy tree is among the results. With a width of at least the
    number of distinct forests this is an exhaustive search; with width 1 it
    is the greedy search.

    Parameters
    ----------
    model : MergeModel
    width : int
    keep_greedy : bool, default=False
        Keep the greedy path in the beam.
    distinct : {"clusters", "score"}, default="clusters"
        When two proposals are the same forest. "clusters": they built the
        same clusters (two merge orders of one forest; identity by a hash of
        the clusters built so far). "score": their total scores agree to
        1e-9 (the de-duplication of equal likelihoods of Greenberg et al.
        2021, which also drops distinct forests that tie).

    Returns
    -------
    trees : list of AgglomerativeTree
        The surviving trees, best log potential first.
    """
    n_points = model.n_points
    # Content hash of a cluster: the sum of random 64-bit keys of its points.
    content = np.random.default_rng(0x5EED).integers(
        0, np.iinfo(np.uint64).max, size=n_points, dtype=np.uint64, endpoint=True
    ).tolist()

    # A row never needs more entries than a cluster has partners.
    row_width = max(1, min(width, n_points - 1))
    start = _BeamState()
    start.cluster = np.arange(n_points, dtype=np.int64)
    start.alive = np.ones(n_points, dtype=bool)
    start.partner = np.full((n_points, row_width), -1, dtype=np.int64)
    start.partner_score = np.full((n_points, row_width), -np.inf)
    start.complete = np.zeros(n_points, dtype=np.uint8)
    start.score, start.key, start.history = 0.0, 0, None
    start.fill_rows(model, np.arange(n_points), row_width)
    forests = [start]
    # Index in `forests` of the forest on the greedy path (None: not tracked).
    greedy = 0 if keep_greedy else None
    live = np.arange(n_points)
    for _ in range(n_points - 1):
        proposals = []
        for index, forest in enumerate(forests):
            first, second, scores = forest.top_merges(model, width)
            proposals.extend(
                (forest.score + float(s), index, int(f), int(g))
                for s, f, g in zip(scores, first, second)
            )
        # Best total first; ties to the earlier forest and lower slots.
        proposals.sort(key=lambda p: (-p[0], p[1], p[2], p[3]))
        if greedy is not None:
            # The greedy forest's best merge (its first proposal) goes first,
            # whatever its total; the beam's order is restored below.
            step = next(p for p in proposals if p[1] == greedy)
            proposals.remove(step)
            proposals.insert(0, step)
        chosen, seen = [], set()
        for total, index, first, second in proposals:
            forest = forests[index]
            a, b = int(forest.cluster[first]), int(forest.cluster[second])
            merged = (content[a] + content[b]) & _MASK64
            key = (forest.key + _mix64(merged)) & _MASK64
            same = key if distinct == "clusters" else round(total, 9)
            if same in seen:
                continue
            seen.add(same)
            chosen.append((total, index, first, second, key, merged))
            if len(chosen) == width:
                break
        if greedy is not None:
            greedy_step = chosen[0]
            chosen.sort(key=lambda c: (-c[0], c[1], c[2], c[3]))
            greedy = chosen.index(greedy_step)
        children = []
        uses = np.bincount([c[1] for c in chosen], minlength=len(forests))
        for total, index, first, second, key, merged in chosen:
            uses[index] -= 1
            # The last child of a forest takes it over instead of a copy.
            child = forests[index] if uses[index] == 0 else forests[index].copy()
            a, b = int(child.cluster[first]), int(child.cluster[second])
            new, log_psi = child.merge(model, first, second, row_width)
            while len(content) <= new:
                content.append(0)
            content[new] = merged
            child.score, child.key = total, key
            child.history = (child.history, a, b, new, log_psi)
            children.append(child)
        forests = children
        now_live = np.unique(np.concatenate([f.cluster[f.alive] for f in forests]))
        model.release(np.setdiff1d(live, now_live, assume_unique=True))
        live = now_live
    trees = []
    for forest in forests:
        steps, node = [], forest.history
        while node is not None:
            node, *step = node
            steps.append(step)
        trees.append(_tree_from_steps(n_points, steps[::-1]))
    trees.sort(key=lambda tree: -tree.log_potential)
    return trees

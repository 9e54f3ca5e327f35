"""Cluster queries shared by the full trellises (clusters are subset masks)."""
import numpy as np


def mask_members(mask, n_points):
    """The points of a subset mask, increasing."""
    return np.flatnonzero((int(mask) >> np.arange(n_points)) & 1)


def members_mask(members):
    """The subset mask (Python int) of validated point indices."""
    return sum(1 << int(i) for i in np.unique(members))


def submasks(mask, n_points):
    """Every subset of the subset ``mask`` (the empty one first), as int64 masks."""
    masks = np.zeros(1, dtype=np.int64)
    for i in mask_members(mask, n_points):
        masks = np.concatenate([masks, masks | (1 << int(i))])
    return masks


def most_probable_masks(log_marginals, order, level_start, n_top, min_size, max_size):
    """The n_top clusters of largest log marginal with min_size..max_size points.

    ``order`` and ``level_start`` list the masks by size then value
    (``subsets_by_size``), which is also the tie order: smaller clusters
    first, then smaller masks. Returns (member arrays, log marginals), most
    probable first. The candidates' values are negated in place in one copy,
    so the query holds two arrays of that length (values and indices).
    """
    n_points = len(level_start) - 2
    first = level_start[max(min_size, 1)]
    candidates = order[first : level_start[min(max_size, n_points) + 1]]
    if len(candidates) == 0:
        return [], np.zeros(0)
    negated = log_marginals[candidates]
    np.negative(negated, out=negated)
    n_top = min(n_top, len(candidates))
    if n_top < len(candidates):
        top = np.argpartition(negated, n_top - 1)[:n_top]
        top = top[np.lexsort((top, negated[top]))]
    else:
        top = np.argsort(negated, kind="stable")
    return [mask_members(mask, n_points) for mask in candidates[top]], -negated[top]

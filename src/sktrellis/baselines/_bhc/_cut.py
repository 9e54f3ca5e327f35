"""The flat cut of a BHC tree (top-down while r_k < 0.5) and the heights of its linkage."""
import numpy as np

_LOG_HALF = np.log(0.5)


def cut(merges, log_r):
    """Merges undone by the r_k < 0.5 cut: top-down, while r_k < 0.5."""
    n_points = len(merges) + 1
    split = np.zeros(len(merges), dtype=bool)
    split[-1] = log_r[-1] < _LOG_HALF
    for k in range(len(merges) - 1, -1, -1):
        if not split[k]:
            continue
        for child in merges[k]:
            if child >= n_points:
                split[child - n_points] = log_r[child - n_points] < _LOG_HALF
    return split


def heights(merges, log_r, split):
    """Largest -log r in each subtree, capped at log 2 below the cut."""
    n_points = len(merges) + 1
    heights = np.empty(len(merges))
    for k, (a, b) in enumerate(merges):
        height = -log_r[k]
        for child in (a, b):
            if child >= n_points:
                height = max(height, heights[child - n_points])
        heights[k] = height if split[k] else min(height, -_LOG_HALF)
    return np.maximum(heights, 0.0)

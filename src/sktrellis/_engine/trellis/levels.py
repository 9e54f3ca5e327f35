"""How the trellises drive their kernels level by level: one policy for all.

Every exact pass processes the subsets of one size ("a level") at a time,
in kernel calls of at most CHUNK_TERMS terms, so KeyboardInterrupt and
progress messages come every fraction of a second; and a call runs on one
thread below PARALLEL_MIN_TERMS terms, where waking a team of threads costs
more than the work (badly so when the other cores are busy).
"""
import time

#: A kernel call handles at most about this many terms (splits, or
#: (subset, cluster) pairs).
CHUNK_TERMS = 1 << 28
#: Below this many terms a kernel call runs on one thread.
PARALLEL_MIN_TERMS = 1 << 16


def threads_for(n_terms, n_threads):
    """Threads worth using for a kernel call over n_terms terms."""
    return n_threads if n_terms >= PARALLEL_MIN_TERMS else 1


def chunk_size(terms_per_subset):
    """Subsets per kernel call at this many terms each."""
    return max(1, CHUNK_TERMS // max(1, terms_per_subset))


def report_level(owner, stage, size, n_points, n_subsets, n_terms, start):
    """One progress line of a level-by-level pass (``verbose``)."""
    print(
        f"[{owner}] {stage}, subsets of size {size}/{n_points}: "
        f"{n_subsets} subsets x {n_terms} terms, {time.perf_counter() - start:.2f} s",
        flush=True,
    )

"""The best-first search driver: how a search ends, and the record it returns."""
import threading

import numpy as np
import pytest

from sktrellis import ExactHierarchicalClustering
from sktrellis._engine.agglomerative.builders import beam_search
from sktrellis._engine.search import driver
from sktrellis._engine.search._best_first import BestFirstSearch
from sktrellis._engine.search.driver import TrellisFallback, run_search
from sktrellis._engine.trellis.levels import DeadlinePassed
from sktrellis.energies import Dasgupta


ENERGY = Dasgupta(beta=1.0)


def points(n_points, seed=0):
    return np.random.default_rng(seed).normal(size=(n_points, 2))


def beam_incumbent(X):
    def incumbent():
        tree = beam_search(ENERGY.merge_model(X), 5)[0]
        return tree.merges, tree.log_potential
    return incumbent


def fallback(X, fits=lambda: True, built=None):
    def split_potential():
        if built is not None:
            built.append(1)
        return ENERGY.split_potential(X)
    return TrellisFallback(rate="separable", fits=fits, split_potential=split_potential)


def assert_counts_are_the_search(result):
    search = result.search
    assert (result.n_iterations, result.n_expanded, result.n_splits,
            result.n_clusters_stored) == (search.n_iterations, search.n_expanded,
                                          search.n_splits, search.n_clusters)


@pytest.mark.parametrize("objective", ["map", "log_partition"])
@pytest.mark.parametrize("n_points", [2, 3, 6])
def test_a_small_set_is_finished_by_the_search(objective, n_points):
    X = points(n_points)
    incumbent = beam_incumbent(X)
    result = run_search(ENERGY.search_bound(X), n_points, incumbent, objective=objective,
                        max_states=10**6)
    assert result.stop_reason == "optimal"
    assert result.solver == "search" and result.trellis is None
    assert result.incumbent_log_potential == incumbent()[1]
    assert result.max_states == 10**6
    assert result.trellis_note == ""
    assert_counts_are_the_search(result)
    exact = ExactHierarchicalClustering(ENERGY).fit(X)
    assert -result.search.upper == pytest.approx(exact.map_log_potential_, abs=1e-9)


@pytest.mark.parametrize("budget, reason", [
    ({"max_time": 1e-9}, "max_time"),
    ({"max_states": 1}, "max_states"),
])
def test_a_budget_ends_the_search_with_its_tree(budget, reason):
    X = points(40)
    result = run_search(ENERGY.search_bound(X), 40, beam_incumbent(X),
                        **{"max_states": 10**6, **budget})
    assert result.stop_reason == reason
    assert result.solver == "search"
    assert_counts_are_the_search(result)
    # The best tree so far, never worse than the incumbent.
    assert -result.search.upper >= result.incumbent_log_potential - 1e-9
    assert result.search.gap > 0.0


def test_a_cancelled_search_is_interrupted():
    cancelled = threading.Event()
    cancelled.set()
    X = points(40)
    result = run_search(ENERGY.search_bound(X), 40, beam_incumbent(X), max_states=10**6,
                        cancelled=cancelled)
    assert result.stop_reason == "interrupted"
    assert result.n_iterations == 0


def test_the_trellis_solves_what_the_search_has_not(monkeypatch):
    # Estimated at no time, the trellis takes over before the first slice.
    monkeypatch.setattr(driver, "inside_pass_seconds", lambda *args: 0.0)
    X = points(10)
    result = run_search(ENERGY.search_bound(X), 10, beam_incumbent(X), max_time=600,
                        max_states=10**6, trellis=fallback(X))
    assert (result.stop_reason, result.solver) == ("optimal", "trellis")
    # Its states are freed; the counts are the search's before the trellis.
    assert result.search is None
    assert result.n_iterations == 0
    exact = ExactHierarchicalClustering(ENERGY).fit(X)
    assert result.trellis.map_log_potential == pytest.approx(exact.map_log_potential_,
                                                             rel=1e-12)
    assert result.trellis.log_partition == pytest.approx(exact.log_partition_, rel=1e-12)


@pytest.mark.parametrize("trellis_fails", ["no longer fits", "gives up"])
def test_the_search_goes_on_when_the_trellis_cannot_finish(monkeypatch, trellis_fails):
    monkeypatch.setattr(driver, "inside_pass_seconds", lambda *args: 0.0)
    asked = []

    def fits():
        # It fits at the start, not after the search (memory taken meanwhile).
        asked.append(1)
        return trellis_fails == "gives up" or len(asked) == 1

    def gives_up(*args, **kwargs):
        raise DeadlinePassed("it would end 1 s past its deadline")

    monkeypatch.setattr(driver, "HierarchicalTrellis", gives_up)
    X = points(8)
    result = run_search(ENERGY.search_bound(X), 8, beam_incumbent(X), max_time=600,
                        max_states=10**6, trellis=fallback(X, fits))
    # Eight points are proven by the search in the rest of the budget.
    assert (result.stop_reason, result.solver) == ("optimal", "search")
    assert len(asked) == 2
    assert_counts_are_the_search(result)
    assert ("would not have ended in time" in result.trellis_note) == (
        trellis_fails == "gives up")


def test_the_trellis_is_not_tried_when_the_budget_cannot_hold_it(monkeypatch):
    monkeypatch.setattr(driver, "inside_pass_seconds", lambda *args: 1e6)
    built = []
    X = points(40)
    result = run_search(ENERGY.search_bound(X), 40, beam_incumbent(X), max_time=1e-9,
                        max_states=10**6, trellis=fallback(X, built=built))
    assert (result.stop_reason, result.solver) == ("max_time", "search")
    assert not built


@pytest.mark.parametrize("estimate, max_time, search_seconds", [
    (100.0, 1000.0, 100.0),  # the search gets the trellis's own time first
    (100.0, 200.0, 75.0),  # then the trellis starts with 1.25x its estimate left
])
def test_the_trellis_is_started_with_room_for_its_estimate_running_short(
        monkeypatch, estimate, max_time, search_seconds):
    monkeypatch.setattr(driver, "inside_pass_seconds", lambda *args: estimate)
    deadlines = []

    def run(*args):
        deadlines.append(args[-1])
        return "max_time"

    monkeypatch.setattr(driver, "_run", run)
    monkeypatch.setattr(driver, "_solve_by_trellis", lambda *args: ("max_time", None))
    X = points(30)
    result = run_search(ENERGY.search_bound(X), 30, beam_incumbent(X), max_time=max_time,
                        max_states=10**6, trellis=fallback(X))
    # First the search up to its own deadline, then (the trellis not ending
    # in time) the search again up to the budget's.
    assert len(deadlines) == 2
    assert deadlines[1] - deadlines[0] == pytest.approx(max_time - search_seconds)
    assert result.stop_reason == "max_time"


@pytest.mark.parametrize("available", [None, 2**30])
def test_the_default_state_cap_is_a_share_of_the_memory_found(available, capsys, monkeypatch):
    from sktrellis._engine import resources

    def memory_budget(share, unknown):
        return (unknown if available is None else int(share * available)), available

    monkeypatch.setattr(resources, "memory_budget", memory_budget)
    X = points(5)
    result = run_search(ENERGY.search_bound(X), 5, beam_incumbent(X), max_time=60.0,
                        verbose=1, owner="Owner")
    memory = 2 * 2**30 if available is None else available // 2
    # Dasgupta's states carry penalties: 64 + 18 bytes per point.
    assert result.max_states == memory // (64 + 18 * 5)
    out = capsys.readouterr().out
    assert f"[Owner] budget: max_time=60 s (the default); at most {result.max_states:,}" in out
    assert ("no memory limit readable" in out) == (available is None)


def test_the_log_z_walk_keeps_the_state_cap_within_one_split():
    """A walk that generates a batch of the root's splits stops the batch at the state cap.

    The batch is a quarter of the splits the cluster has: on a flat landscape
    (a low beta) the root's ungenerated rest stays the widest part of the
    bracket, and before the batch stopped at the cap one walk overshot it by
    hundreds of states. One split adds at most its generator, the net growth
    of the generator's heap (one per point, once more when the incumbent's
    split is skipped), the split and its two clusters (none solved exactly
    at ``exact_size=0``).
    """
    n_points = 16
    bound = Dasgupta(beta=0.1).search_bound(points(n_points))
    for cap in [500, 1000, 2000, 4000, 8000]:
        search = BestFirstSearch(bound, n_points, objective="log_partition", exact_size=0)
        assert search.run(max_states=cap) == "max_states"
        assert search.n_states - cap <= 2 * n_points + 4


@pytest.mark.parametrize("objective", ["map", "log_partition"])
def test_the_last_bracket_is_revised_within_the_budget(objective, monkeypatch):
    """The final revision of the brackets gets what is left of max_time, and at least a slice.

    With nothing left and no least slice it revises nothing: the root's
    bracket as the walks left it, still certified.
    """
    n_points = 9
    X = points(n_points)
    exact = ExactHierarchicalClustering(ENERGY).fit(X).log_partition_
    run = dict(objective=objective, exact_size=0, max_states=10**6,
               bracket_log_partition=True)
    unbudgeted = run_search(ENERGY.search_bound(X), n_points, beam_incumbent(X),
                            max_time=None, **run)
    assert unbudgeted.search.log_partition_refreshed
    with_a_slice = run_search(ENERGY.search_bound(X), n_points, beam_incumbent(X),
                              max_time=1e-9, **run)
    assert with_a_slice.stop_reason == "max_time"
    assert with_a_slice.search.log_partition_refreshed
    monkeypatch.setattr(driver, "_LEAST_REFRESH_SECONDS", 0.0)
    result = run_search(ENERGY.search_bound(X), n_points, beam_incumbent(X), max_time=1e-9,
                        **run)
    assert result.search.n_revised == 0 and not result.search.log_partition_refreshed
    assert result.log_partition_bounds == result.search.root_log_partition_bracket
    for bounds in (unbudgeted.log_partition_bounds, with_a_slice.log_partition_bounds,
                   result.log_partition_bounds):
        assert bounds[0] <= exact + 1e-9 * abs(exact) and exact <= bounds[1] + 1e-9 * abs(exact)


def test_the_bracket_is_revised_only_when_asked():
    X = points(9)
    result = run_search(ENERGY.search_bound(X), 9, beam_incumbent(X), max_states=10**6,
                        exact_size=0)
    assert result.log_partition_bounds == (-np.inf, np.inf)
    assert result.search.n_revised == 0


def test_ctrl_c_in_the_last_revision_keeps_the_brackets(monkeypatch):
    def interrupted(search, deadline):
        raise KeyboardInterrupt
    monkeypatch.setattr(driver, "final_log_partition_bounds", interrupted)
    X = points(40)
    result = run_search(ENERGY.search_bound(X), 40, beam_incumbent(X), max_time=1e-9,
                        max_states=10**6, bracket_log_partition=True)
    assert result.stop_reason == "interrupted"
    assert result.log_partition_bounds == result.search.root_log_partition_bracket


class _RecordedRevision(BestFirstSearch):
    """The search, recording the time each revision of the brackets is given."""

    given = []

    def log_partition_bounds(self, seconds=np.inf, max_revisions=-1):
        self.given.append(seconds)
        return super().log_partition_bounds(seconds, max_revisions)


@pytest.mark.parametrize("max_time", [None, 60.0])
def test_a_cancelled_search_revises_its_brackets_for_the_least_slice(max_time, monkeypatch):
    """After Ctrl-C or a cancel the caller wants out: not the rest of the budget."""
    monkeypatch.setattr(driver, "BestFirstSearch", _RecordedRevision)
    monkeypatch.setattr(_RecordedRevision, "given", [])
    cancelled = threading.Event()
    cancelled.set()
    X = points(12)
    result = run_search(ENERGY.search_bound(X), 12, beam_incumbent(X), max_time=max_time,
                        max_states=10**6, cancelled=cancelled, bracket_log_partition=True)
    assert result.stop_reason == "interrupted"
    assert _RecordedRevision.given == [driver._LEAST_REFRESH_SECONDS]
    assert np.isfinite(result.log_partition_bounds).all()



class _FailingRevision(BestFirstSearch):
    """The search, with no memory left for the revision of the brackets; tries counted."""

    tries = 0

    def log_partition_bounds(self, seconds=np.inf, max_revisions=-1):
        type(self).tries += 1
        raise MemoryError


@pytest.mark.parametrize("objective", ["map", "log_partition"])
def test_no_memory_for_the_last_revision_keeps_the_search(objective, monkeypatch):
    """The revision allocates its order of the clusters at the end of a run that may have
    filled the memory: failing, it leaves the root's bracket as it is, still certified."""
    monkeypatch.setattr(driver, "BestFirstSearch", _FailingRevision)
    X = points(9)
    exact = ExactHierarchicalClustering(ENERGY).fit(X).log_partition_
    result = run_search(ENERGY.search_bound(X), 9, beam_incumbent(X), objective=objective,
                        max_states=10**6, exact_size=0, bracket_log_partition=True)
    assert result.search is not None
    lower, upper = result.log_partition_bounds
    assert (lower, upper) == result.search.root_log_partition_bracket
    assert lower <= exact + 1e-9 * abs(exact) and exact <= upper + 1e-9 * abs(exact)


class _SteppedSearch(BestFirstSearch):
    """The search in slices of ``step`` states instead of seconds, so that two runs take the
    same walks; each revision of the brackets recorded as (walked, revised) root brackets."""

    step = 200
    revisions = []

    def run(self, seconds=np.inf, max_states=-1):
        cap = self.n_states + self.step
        reason = super().run(max_states=cap if max_states < 0 else min(cap, max_states))
        return "slice" if reason == "max_states" and self.n_states < max_states else reason

    def log_partition_bounds(self, seconds=np.inf, max_revisions=-1):
        walked = self.root_log_partition_bracket
        revised = super().log_partition_bounds(seconds, max_revisions)
        self.revisions.append((walked, revised))
        return revised


def width(bracket):
    return bracket[1] - bracket[0]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_tol_stop_reads_the_revised_bracket(seed, monkeypatch):
    """A log Z search stops after the first slice whose revised bracket is within tol, though
    the walks left the root's bracket wider: a walk revises only its own path.

    Revised after every slice (no limit on the share), in slices of a fixed count of states:
    a first run (tol=0) records every revision; the second, with tol between the walked and
    the revised width of the first revision that narrowed the root, stops right there
    (earlier slices' brackets were wider than the walked one there) and reports that bracket.
    """
    monkeypatch.setattr(driver, "BestFirstSearch", _SteppedSearch)
    monkeypatch.setattr(driver, "_REVISION_SHARE", np.inf)
    monkeypatch.setattr(_SteppedSearch, "revisions", [])
    n_points = 8
    X = points(n_points, seed)
    exact = ExactHierarchicalClustering(ENERGY).fit(X).log_partition_
    run = dict(objective="log_partition", exact_size=0, max_states=10**6,
               bracket_log_partition=True)
    run_search(ENERGY.search_bound(X), n_points, beam_incumbent(X), tol=0.0, **run)
    widths = [(width(walked), width(revised)) for walked, revised in _SteppedSearch.revisions]
    narrowed = [k for k, (walked, revised) in enumerate(widths) if walked > revised]
    assert narrowed
    k = narrowed[0]
    tol = sum(widths[k]) / 2
    monkeypatch.setattr(_SteppedSearch, "revisions", [])
    result = run_search(ENERGY.search_bound(X), n_points, beam_incumbent(X), tol=tol, **run)
    assert result.stop_reason == "optimal"
    # The stop's revision, then the final one, which finds nothing changed.
    assert len(_SteppedSearch.revisions) == k + 2
    walked, revised = _SteppedSearch.revisions[k]
    assert width(walked) > tol >= width(revised)
    assert result.log_partition_bounds == revised
    lower, upper = result.log_partition_bounds
    assert lower <= exact + 1e-9 * abs(exact) and exact <= upper + 1e-9 * abs(exact)


def test_the_revisions_between_slices_keep_their_share(monkeypatch):
    """After a revision of c seconds the walks run c / share before the next: with a share
    too small for any second one, the run revises once between its slices, then at its end."""
    monkeypatch.setattr(driver, "BestFirstSearch", _SteppedSearch)
    monkeypatch.setattr(driver, "_REVISION_SHARE", 1e-12)
    monkeypatch.setattr(_SteppedSearch, "revisions", [])
    X = points(8)
    result = run_search(ENERGY.search_bound(X), 8, beam_incumbent(X), objective="log_partition",
                        exact_size=0, max_states=10**6, bracket_log_partition=True)
    assert result.stop_reason == "optimal" and result.n_iterations > 1
    assert len(_SteppedSearch.revisions) == 2


@pytest.mark.parametrize("bracket_log_partition, revisions", [(False, 0), (True, 1)])
def test_a_map_search_revises_its_brackets_only_when_asked_at_its_end(
        bracket_log_partition, revisions, monkeypatch):
    monkeypatch.setattr(driver, "BestFirstSearch", _SteppedSearch)
    monkeypatch.setattr(driver, "_REVISION_SHARE", np.inf)
    monkeypatch.setattr(_SteppedSearch, "revisions", [])
    X = points(8)
    result = run_search(ENERGY.search_bound(X), 8, beam_incumbent(X), objective="map",
                        exact_size=0, max_states=10**6,
                        bracket_log_partition=bracket_log_partition)
    assert result.stop_reason == "optimal" and result.n_iterations > 1
    assert len(_SteppedSearch.revisions) == revisions


class _InterruptedRevision(_SteppedSearch):
    """The search, with Ctrl-C in its first revision of the brackets."""

    def log_partition_bounds(self, seconds=np.inf, max_revisions=-1):
        if not self.revisions:
            self.revisions.append(None)
            raise KeyboardInterrupt
        return super().log_partition_bounds(seconds, max_revisions)


def test_ctrl_c_in_a_revision_between_slices_interrupts_the_search(monkeypatch):
    """Ctrl-C in a revision between slices ends the run as in a slice: the final revision gets
    its least slice, and the bracket still holds log Z."""
    monkeypatch.setattr(driver, "BestFirstSearch", _InterruptedRevision)
    monkeypatch.setattr(_InterruptedRevision, "revisions", [])
    X = points(8)
    exact = ExactHierarchicalClustering(ENERGY).fit(X).log_partition_
    result = run_search(ENERGY.search_bound(X), 8, beam_incumbent(X), objective="log_partition",
                        exact_size=0, max_states=10**6, max_time=60.0,
                        bracket_log_partition=True)
    assert result.stop_reason == "interrupted"
    assert len(_InterruptedRevision.revisions) == 2
    lower, upper = result.log_partition_bounds
    assert lower <= exact + 1e-9 * abs(exact) and exact <= upper + 1e-9 * abs(exact)


def test_no_memory_for_a_revision_between_slices_turns_them_off(monkeypatch):
    """After a revision between slices found no memory, the run goes on with the walked
    brackets and tries no more until its last revision."""

    class Failing(_SteppedSearch, _FailingRevision):
        pass

    monkeypatch.setattr(driver, "BestFirstSearch", Failing)
    monkeypatch.setattr(driver, "_REVISION_SHARE", np.inf)
    monkeypatch.setattr(Failing, "tries", 0)
    X = points(9)
    result = run_search(ENERGY.search_bound(X), 9, beam_incumbent(X), objective="log_partition",
                        max_states=10**6, exact_size=0, bracket_log_partition=True)
    assert result.n_iterations > 1 and result.search.n_states > 2 * Failing.step
    assert Failing.tries == 2   # the first between slices, and the last


def test_a_bracket_the_last_revision_brings_within_tol_is_optimal(monkeypatch):
    """Stopped by the state cap (or the clock) before its slices' revisions saw it, the run's
    last revision can bring the bracket within tol: the stop's own rule then calls it
    optimal, not a stop short of tol."""
    monkeypatch.setattr(driver, "BestFirstSearch", _SteppedSearch)
    monkeypatch.setattr(driver, "_REVISION_SHARE", np.inf)
    X = points(10, 1)
    for cap in (3000, 6000, 12000, 24000):
        monkeypatch.setattr(_SteppedSearch, "revisions", [])
        first = run_search(ENERGY.search_bound(X), 10, beam_incumbent(X),
                           objective="log_partition", exact_size=0, max_states=cap,
                           bracket_log_partition=True)
        walked, revised = _SteppedSearch.revisions[-1]
        if first.stop_reason == "max_states" and width(revised) < width(walked):
            break
    else:
        pytest.fail("no state cap left the last revision narrower than the walked bracket")
    tol = (width(revised) + width(walked)) / 2
    monkeypatch.setattr(_SteppedSearch, "revisions", [])
    result = run_search(ENERGY.search_bound(X), 10, beam_incumbent(X), objective="log_partition",
                        exact_size=0, max_states=cap, tol=tol, bracket_log_partition=True)
    assert width(result.log_partition_bounds) <= tol
    assert result.stop_reason == "optimal"


def test_no_trellis_when_a_revision_brings_the_bracket_within_tol(monkeypatch):
    """Before the trellis takes over a log Z search, a revision of milliseconds may already
    bring the bracket within tol: then the trellis, seconds or minutes, is not started."""
    monkeypatch.setattr(driver, "inside_pass_seconds", lambda *args: 0.0)
    X = points(10)
    exact = ExactHierarchicalClustering(ENERGY).fit(X).log_partition_
    wide = run_search(ENERGY.search_bound(X), 10, beam_incumbent(X), objective="log_partition",
                      max_time=600, max_states=10**6, exact_size=0, bracket_log_partition=True,
                      trellis=fallback(X))
    assert wide.solver == "trellis"   # a tol of 0: the trellis proves log Z
    result = run_search(ENERGY.search_bound(X), 10, beam_incumbent(X), objective="log_partition",
                        max_time=600, max_states=10**6, exact_size=0, bracket_log_partition=True, tol=1e3,
                        trellis=fallback(X))
    assert (result.stop_reason, result.solver) == ("optimal", "search")
    lower, upper = result.log_partition_bounds
    assert upper - lower <= 1e3 and lower <= exact <= upper

"""The Ginkgo toy parton-shower splitting likelihood (jet physics)."""
from numbers import Real

import numpy as np
from sklearn.utils._param_validation import Interval

from .._engine.potential._ginkgo import ginkgo_potential, log_psi_of_mass_arrays
from .._engine.search._ginkgo_bound import GinkgoBound
from .._engine.tables import subset_sums
from ._base import HierarchicalEnergy
from ._merge import MergeModel

# Sums of momenta up to this have squares well inside float64.
_LARGEST_MOMENTUM_SUM = 1e150


def ginkgo_log_psi(mass2_parent, mass2_left, mass2_right, lam, t_cut):
    """Vectorised log psi of Ginkgo splits from the three invariant masses squared.

    The formula of :class:`GinkgoLikelihood`, evaluated by the same C code as
    the exact kernel: a child with ``t <= 0`` is a leaf, a parent below
    ``t_cut`` cannot split.
    """
    return log_psi_of_mass_arrays(mass2_parent, mass2_left, mass2_right, float(lam),
                                  float(t_cut))


class GinkgoLikelihood(HierarchicalEnergy):
    """Likelihood of a jet's binary splitting history in the Ginkgo toy shower.

    X holds one four-momentum ``(E, px, py, pz)`` per observed particle. An
    inner node's four-momentum is the sum of its leaves', its invariant mass
    squared ``t = E**2 - |p|**2``; leaves carry ``t = 0``. A parent P with
    ``t_P < t_cut`` cannot split (log psi = -inf). Otherwise, with
    ``t_a >= t_b`` the children's values and ``t_P' = (sqrt(t_P) - sqrt(t_a))**2``::

        log psi = g(t_P, t_a) + g(t_P', t_b) - log(4 pi)
        g(tau, t) = log(lam / tau) - lam t / tau - log(1 - exp(-lam))   (inner child)
        g(tau, t) = log(1 - exp(-lam t_cut / tau)) - log(1 - exp(-lam))  (leaf)

    i.e. each child's mass is drawn from an exponential truncated to its
    available range, a leaf being a draw below ``t_cut``, and the decay
    direction is isotropic. With ``lam=1.5, t_cut=16`` this reproduces the
    published toy-jet results of Greenberg et al. (AISTATS 2021, eq. 5-6).

    Parameters
    ----------
    lam : float, default=1.5
        Rate of the exponential distribution of child masses.
    t_cut : float, default=16.0
        Mass-squared threshold below which a particle no longer splits.

    See Also
    --------
    sktrellis.datasets.make_jets : Jets drawn from this shower model.
    sktrellis.BestFirstHierarchicalClustering : Certified MAP trees of larger jets.

    References
    ----------
    K. Cranmer, S. Macaluso, D. Pappadopulo. Toy generative model for jets
    (Ginkgo), 2019.
    C. S. Greenberg, S. Macaluso, N. Monath, J.-A. Lee, P. Flaherty, K. Cranmer,
    A. McGregor, A. McCallum. Data structures & algorithms for exact inference
    in hierarchical clustering. AISTATS 2021.

    Examples
    --------
    >>> from sktrellis import ExactHierarchicalClustering
    >>> from sktrellis.datasets import make_jets
    >>> from sktrellis.energies import GinkgoLikelihood
    >>> jet = make_jets(n_leaves=6, random_state=0)[0]
    >>> model = ExactHierarchicalClustering(GinkgoLikelihood()).fit(jet.momenta)
    >>> bool(model.map_log_potential_ >= jet.log_likelihood)
    True
    """

    _parameter_constraints = {
        "lam": [Interval(Real, 0, None, closed="neither")],
        "t_cut": [Interval(Real, 0, None, closed="neither")],
    }

    potential_kind = "function"
    # The invariant mass squared of every subset and its square root.
    table_bytes_per_subset = 16

    def __init__(self, lam=1.5, t_cut=16.0):
        self.lam = lam
        self.t_cut = t_cut

    def check_momenta(self, X):
        """Validate an (n, 4) array of physical four-momenta (``E >= |p|``).

        Parameters
        ----------
        X : array-like of shape (n_samples, 4)
            Rows (E, px, py, pz).

        Returns
        -------
        X : ndarray of shape (n_samples, 4), float64
            The validated four-momenta.
        """
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != 4:
            raise ValueError(
                "GinkgoLikelihood needs four-momenta (E, px, py, pz): X must have "
                f"shape (n_samples, 4), got {X.shape}"
            )
        # Invariant masses square sums of up to n momenta: beyond this their
        # squares overflow float64 (and |p| below would read inf). The
        # likelihood is not scale-free (t_cut fixes the units), so refuse.
        largest = float(np.max(np.abs(X))) if X.size else 0.0
        if largest * max(len(X), 1) > _LARGEST_MOMENTUM_SUM:
            raise ValueError(
                f"GinkgoLikelihood: four-momenta up to {largest!r} over n_samples={len(X)} "
                "particles overflow float64 invariant masses (their sum must stay below "
                f"{_LARGEST_MOMENTUM_SUM:.0e}); express them in larger units and scale "
                "t_cut by the square of the same factor"
            )
        energy = X[:, 0]
        momentum = np.sqrt(np.sum(X[:, 1:] ** 2, axis=1))
        bad = np.flatnonzero((energy < 0) | (energy < momentum * (1 - 1e-9)))
        if bad.size:
            i = bad[0]
            raise ValueError(
                f"four-momentum {i} has E={energy[i]!r} < |p|={momentum[i]!r}; "
                "particles need E >= |p| (columns are E, px, py, pz)"
            )
        return X

    def split_potential(self, X):
        """Validate the four-momenta and tabulate the mass of every subset.

        Parameters
        ----------
        X : array-like of shape (n_samples, 4)
            Rows (E, px, py, pz) of the observed particles.

        Returns
        -------
        potential : SplitPotential
            A function potential: the Ginkgo formula in C reads the invariant
            mass squared of the parent and of both children per split.
        """
        self._validate_params()
        X = self.check_momenta(X)
        n_points = len(X)
        mass2 = subset_sums(X[:, 0]) ** 2
        for axis in range(1, 4):
            mass2 -= subset_sums(X[:, axis]) ** 2
        # Leaves are massless in the model, whatever rounding says.
        mass2[1 << np.arange(n_points)] = 0.0
        mass2[0] = 0.0
        return ginkgo_potential(n_points, mass2, float(self.lam), float(self.t_cut))

    def merge_model(self, X):
        """Incremental statistics for agglomerative search and sparse trellises.

        Parameters
        ----------
        X : ndarray of shape (n_samples, 4)
            Four-momenta, already checked to be finite 2-d float64.

        Returns
        -------
        model : MergeModel
            See :mod:`sktrellis.energies._merge`.
        """
        self._validate_params()
        return _GinkgoMergeModel(self.check_momenta(X), float(self.lam), float(self.t_cut))

    def search_bound(self, X):
        """Validate X and build the admissible bound of best-first search.

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features)
            Already checked to be finite 2-d float64 by the estimator.

        Returns
        -------
        bound : GinkgoBound
            Proven admissible in its class docstring.
        """
        self._validate_params()
        return GinkgoBound(self.check_momenta(X), self.lam, self.t_cut)


class _GinkgoMergeModel(MergeModel):
    """Summed four-momenta per cluster; the likelihood needs nothing else.

    Merges are ranked by the plain log likelihood of the split, as in the
    greedy and beam-search baselines of Greenberg et al. (2021): it is a
    normalised density already.
    """

    _COMPONENTS = ("energy", "px", "py", "pz")

    def __init__(self, momenta, lam, t_cut):
        super().__init__(len(momenta))
        for k, name in enumerate(self._COMPONENTS):
            self._add_column(name, momenta[:, k].copy())
        # Points are massless in the model, whatever rounding says.
        self._add_column("mass2", np.zeros(len(momenta)))
        self.lam = lam
        self.t_cut = t_cut

    def _combine(self, ids, parts, indicator, members):
        weights = indicator.astype(np.float64)
        for name in self._COMPONENTS:
            column = getattr(self, name)
            column[ids] = weights @ column[parts]
        self.mass2[ids] = self.energy[ids] ** 2 - (
            self.px[ids] ** 2 + self.py[ids] ** 2 + self.pz[ids] ** 2
        )
        return ids

    def split_log_potential(self, parents, lefts, rights):
        return ginkgo_log_psi(
            self.mass2[parents], self.mass2[lefts], self.mass2[rights], self.lam, self.t_cut
        )

    def scores(self, rows, cols):
        rows = np.asarray(rows, dtype=np.int64)[:, None]
        cols = np.asarray(cols, dtype=np.int64)[None, :]
        total = [getattr(self, name)[rows] + getattr(self, name)[cols] for name in self._COMPONENTS]
        mass2_parent = total[0] ** 2 - (total[1] ** 2 + total[2] ** 2 + total[3] ** 2)
        return ginkgo_log_psi(
            mass2_parent, self.mass2[rows], self.mass2[cols], self.lam, self.t_cut
        )

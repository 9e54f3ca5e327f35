"""Datasets: toy parton-shower jets, planted subtypes, bit patterns and a small bundled real dataset."""
import csv
from importlib import resources
from numbers import Integral, Real

import numpy as np
from sklearn.utils import Bunch, check_random_state
from sklearn.utils._param_validation import Interval, validate_params

from ._engine.tree.conversion import linkage_from_merges
from .energies._ginkgo import ginkgo_log_psi

__all__ = ["load_iris12", "make_bit_patterns", "make_jets", "make_planted_subtypes"]

# The published toy jets: a 30 GeV-mass parent moving with |p| = 400 along (1, 1, 1).
_ROOT_MASS2 = 900.0
_ROOT_MOMENTUM = (400.0 / np.sqrt(3.0),) * 3
# Largest requested size for which the published root mass is kept: at
# 900 GeV**2 (lam 1.5, t_cut 16) 1.7 % of showers have 12 leaves, 0.17 %
# have 14 (20,000 showers).
_PUBLISHED_MAX_LEAVES = 12
# Pilot showers per step of the root-mass calibration.
_N_PILOT = 200


def _truncated_exponential(scale, lam, rng):
    """A draw of t from f(t | scale, lam) = lam / scale exp(-lam t / scale) / (1 - exp(-lam)) on [0, scale]."""
    return -scale / lam * np.log1p(-rng.random() * -np.expm1(-lam))


def _boost(momentum, parent):
    """Lorentz boost of a rest-frame four-momentum into the frame where the parent has momentum `parent`."""
    mass = np.sqrt(max(parent[0] ** 2 - parent[1:] @ parent[1:], 0.0))
    beta = parent[1:] / parent[0]
    gamma = parent[0] / mass
    beta_dot_p = beta @ momentum[1:]
    beta2 = beta @ beta
    energy = gamma * (momentum[0] + beta_dot_p)
    factor = (gamma - 1.0) * beta_dot_p / beta2 + gamma * momentum[0] if beta2 > 0 else 0.0
    return np.concatenate([[energy], momentum[1:] + factor * beta])


def _leaf_count(mass2, lam, t_cut, rng):
    """Leaves of one shower from a particle of mass squared ``mass2`` (masses only).

    The same draws as ``_shower`` without the kinematics, which do not
    change the masses.
    """
    count, stack = 0, [mass2]
    while stack:
        t = stack.pop()
        if t < t_cut:
            count += 1
            continue
        t_a = _truncated_exponential(t, lam, rng)
        stack.append(t_a)
        stack.append(_truncated_exponential((np.sqrt(t) - np.sqrt(t_a)) ** 2, lam, rng))
    return count


def _root_mass_for(n_leaves, lam, t_cut, rng):
    """A root mass squared at which showers have ``n_leaves`` leaves on average.

    The mean leaf count grows with the root mass (about as its 0.35th power
    at lam 1.5): bisection on log mass over the means of ``_N_PILOT`` pilot
    showers per step.
    """
    def mean_leaves(log_mass2):
        return np.mean([_leaf_count(np.exp(log_mass2), lam, t_cut, rng) for _ in range(_N_PILOT)])

    low = np.log(t_cut)
    high = low + 2.0
    while mean_leaves(high) < n_leaves:
        low, high = high, high + 2.0
    for _ in range(8):
        middle = 0.5 * (low + high)
        if mean_leaves(middle) < n_leaves:
            low = middle
        else:
            high = middle
    return float(np.exp(0.5 * (low + high)))


def _shower(momentum, mass2, lam, t_cut, rng, leaves, nodes):
    """Split a particle recursively; returns its node (leaf index or nested pair)."""
    if mass2 < t_cut:
        leaves.append(momentum)
        return len(leaves) - 1
    # The heavier-ranked child's mass is drawn against the parent's, the
    # other's against what is left: t_P' = (sqrt(t_P) - sqrt(t_a))**2.
    t_a = _truncated_exponential(mass2, lam, rng)
    t_b = _truncated_exponential((np.sqrt(mass2) - np.sqrt(t_a)) ** 2, lam, rng)
    t_a = t_a if t_a >= t_cut else 0.0
    t_b = t_b if t_b >= t_cut else 0.0
    log_psi = float(ginkgo_log_psi(mass2, t_a, t_b, lam, t_cut))
    # Two-body decay, isotropic in the parent's rest frame.
    parent_mass = np.sqrt(mass2)
    m_a, m_b = np.sqrt(t_a), np.sqrt(t_b)
    kallen = (mass2 - (m_a + m_b) ** 2) * (mass2 - (m_a - m_b) ** 2)
    p_star = np.sqrt(max(kallen, 0.0)) / (2 * parent_mass)
    cos_theta = rng.uniform(-1, 1)
    phi = rng.uniform(0, 2 * np.pi)
    sin_theta = np.sqrt(1 - cos_theta**2)
    direction = np.array([sin_theta * np.cos(phi), sin_theta * np.sin(phi), cos_theta])
    rest_a = np.concatenate([[np.sqrt(t_a + p_star**2)], p_star * direction])
    rest_b = np.concatenate([[np.sqrt(t_b + p_star**2)], -p_star * direction])
    node = len(nodes)
    nodes.append(log_psi)
    left = _shower(_boost(rest_a, momentum), t_a, lam, t_cut, rng, leaves, nodes)
    right = _shower(_boost(rest_b, momentum), t_b, lam, t_cut, rng, leaves, nodes)
    return (node, left, right)


def _children_first_merges(tree, leaf_index):
    """Merges and node ids of a nested (node, left, right) tree, any number of leaves.

    Merge k is the inner node at preorder position N - 2 - k (reverse
    preorder, so children come first), its children listed with the part
    holding the lowest leaf index first. Python integers hold the leaf
    sets, so there is no limit on the number of leaves.
    """
    preorder, position = [], {}

    def walk(node):
        # Returns the node's set of leaves as an integer mask.
        if isinstance(node, int):
            return 1 << leaf_index[node]
        position[node[0]] = len(preorder)
        preorder.append(None)
        left, right = walk(node[1]), walk(node[2])
        preorder[position[node[0]]] = (node, left, right)
        return left | right

    walk(tree)
    n_inner = len(preorder)
    merges, node_ids = [], []
    for node, mask_a, mask_b in reversed(preorder):
        children = [leaf_index[child] if isinstance(child, int)
                    else 2 * n_inner - position[child[0]] for child in node[1:]]
        union = mask_a | mask_b
        if not mask_a & (union & -union):
            children.reverse()
        merges.append(children)
        node_ids.append(node[0])
    return np.array(merges, dtype=np.intp).reshape(-1, 2), node_ids


@validate_params(
    {
        "n_jets": [Interval(Integral, 1, None, closed="left")],
        "n_leaves": [Interval(Integral, 2, None, closed="left"), None],
        "lam": [Interval(Real, 0, None, closed="neither")],
        "t_cut": [Interval(Real, 0, None, closed="neither")],
        "root_mass2": [Interval(Real, 0, None, closed="neither"), None],
        "max_tries": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=True,
)
def make_jets(n_jets=1, *, n_leaves=None, lam=1.5, t_cut=16.0, root_mass2=None,
              max_tries=100_000, random_state=None):
    """Toy jets from the Ginkgo parton-shower process, with their true trees.

    A parent of mass squared ``t_P >= t_cut`` decays into two children: one
    child's mass squared is drawn from an exponential of rate ``lam / t_P``
    truncated to ``[0, t_P]``, the other's from the same law on
    ``[0, (sqrt(t_P) - sqrt(t_a))**2]``; a child below ``t_cut`` is an
    observed, massless particle. The decay is isotropic in the parent's rest
    frame, boosted to the lab. The root has mass squared ``root_mass2`` and
    momentum 400 along (1, 1, 1), as in the published toy jets. This is the
    process whose likelihood is :class:`~sktrellis.energies.GinkgoLikelihood`.

    **Sizes.** Without ``n_leaves`` a jet has as many particles as its
    shower gives, never redrawn or truncated. The count grows with
    ``root_mass2 / t_cut``; at the published 900 (lam 1.5, t_cut 16) it
    has mean 7.6, median 8, 1-99 % range 3-12 and a maximum of 16 in
    20,000 showers; at 4,000: mean 12.9, 1-99 % range 6-21; at 16,000:
    mean 21.1, range 10-33 (the mean grows about as ``root_mass2**0.35``).
    With ``n_leaves`` each jet is a shower conditioned on exactly that
    many particles (showers of other sizes are rejected), from the
    published root mass for up to 12 particles (where 900 gives that
    size in at least 1.7 % of showers) and otherwise, unless
    ``root_mass2`` is given, from the root mass at which showers have
    ``n_leaves`` particles on average (found by bisection over pilot
    showers; for example about 1.6e4 for 20 and 5e4 for 30 particles),
    where about 5-10 % of showers have the requested size. Any size of at
    least 2 can be requested; the exact trellis takes about 25 particles,
    the best-first search 64.

    Parameters
    ----------
    n_jets : int, default=1
        Number of jets.
    n_leaves : int, default=None
        If given, only jets with exactly this many particles are kept
        (rejection sampling, at most ``max_tries`` showers per jet).
    lam : float, default=1.5
        Rate parameter of the mass draws.
    t_cut : float, default=16.0
        Mass-squared threshold below which particles stop splitting.
    root_mass2 : float, default=None
        Mass squared of the initial particle, at least ``t_cut``; larger
        values give more leaves. None: 900 (the published jets), or for
        ``n_leaves`` above 12 the mass at which that size is typical (see
        Sizes above).
    max_tries : int, default=100_000
        Showers to try per jet when ``n_leaves`` is given.
    random_state : int, RandomState instance or None, default=None
        Seed.

    Returns
    -------
    jets : list of Bunch
        Each with ``momenta`` (n_leaves, 4) leaf four-momenta (E, px, py,
        pz) in random order, ``linkage`` the true tree as a scipy linkage
        matrix (heights as in ``ExactHierarchicalClustering``), and
        ``log_likelihood`` the true tree's log likelihood under
        ``GinkgoLikelihood(lam, t_cut)`` and ``root_mass2`` the root's mass
        squared.

    See Also
    --------
    sktrellis.energies.GinkgoLikelihood : The likelihood of this process.
    sktrellis.BestFirstHierarchicalClustering : MAP tree and log Z bracket up to 64 particles.

    Examples
    --------
    >>> from sktrellis.datasets import make_jets
    >>> jets = make_jets(3, n_leaves=5, random_state=0)
    >>> [jet.momenta.shape for jet in jets]
    [(5, 4), (5, 4), (5, 4)]
    >>> make_jets(n_leaves=30, random_state=0)[0].momenta.shape
    (30, 4)
    """
    rng = check_random_state(random_state)
    if root_mass2 is None:
        root_mass2 = _ROOT_MASS2
        if n_leaves is not None and n_leaves > _PUBLISHED_MAX_LEAVES:
            root_mass2 = _root_mass_for(n_leaves, lam, t_cut, rng)
    if root_mass2 < t_cut:
        raise ValueError(
            f"root_mass2={root_mass2} is below t_cut={t_cut}: the root would not split; "
            "raise root_mass2 or lower t_cut")
    root = np.concatenate([[np.sqrt(root_mass2 + 400.0**2)], _ROOT_MOMENTUM])
    jets = []
    for _ in range(n_jets):
        for _ in range(max_tries):
            leaves, nodes = [], []
            tree = _shower(root, root_mass2, lam, t_cut, rng, leaves, nodes)
            if n_leaves is None or len(leaves) == n_leaves:
                break
        else:
            raise ValueError(
                f"no jet with n_leaves={n_leaves} in {max_tries} showers of root_mass2="
                f"{root_mass2}; change root_mass2 (more mass, more leaves) or max_tries"
            )
        permutation = rng.permutation(len(leaves))
        momenta = np.array(leaves)[np.argsort(permutation)]
        merges, node_ids = _children_first_merges(tree, [int(p) for p in permutation])
        log_psi = np.array(nodes)[node_ids]
        linkage = linkage_from_merges(merges, log_psi)
        jets.append(Bunch(momenta=momenta, linkage=linkage, log_likelihood=float(log_psi[::-1].sum()),
                          root_mass2=float(root_mass2)))
    return jets


def load_iris12():
    """Twelve iris flowers, four of each species: the bundled demo dataset.

    Rows 0-3, 50-53 and 100-103 of Fisher's iris data (as shipped with
    scikit-learn): small enough that every one of the 13,749,310,575 binary
    trees over them is accounted for exactly.

    Returns
    -------
    data : Bunch
        ``data`` (12, 4) measurements in cm, ``target`` (12,) species codes,
        ``target_names``, ``feature_names`` and ``sample_names``.

    See Also
    --------
    sklearn.datasets.load_iris : The full 150-flower data set.

    Examples
    --------
    >>> from sktrellis.datasets import load_iris12
    >>> load_iris12().data.shape
    (12, 4)
    """
    with resources.files("sktrellis").joinpath("data/iris12.csv").open() as stream:
        rows = list(csv.reader(stream))
    header, body = rows[0], rows[1:]
    species = [row[-1] for row in body]
    names = sorted(set(species), key=species.index)
    return Bunch(
        data=np.array([[float(v) for v in row[:-1]] for row in body]),
        target=np.array([names.index(s) for s in species]),
        target_names=np.array(names),
        feature_names=header[:-1],
        sample_names=[f"{s}_{i}" for i, s in enumerate(species)],
    )


@validate_params(
    {
        "n_templates": [Interval(Integral, 1, None, closed="left")],
        "length": [Interval(Integral, 1, None, closed="left")],
        "reads_per_template": [Interval(Integral, 1, None, closed="left")],
        "error_rate": [Interval(Real, 0, 0.5, closed="neither")],
        "shuffle": ["boolean"],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=True,
)
def make_bit_patterns(n_templates, *, length=30, reads_per_template=10, error_rate=0.05,
                      shuffle=True, random_state=None):
    """Noisy reads of random binary templates, with their pairwise likelihood ratios.

    The clustering problem of Kumar & Levy (2015, section 4), an abstract
    version of counting DNA molecules tagged by random mutagenesis: each of
    ``n_templates`` templates is a uniformly random word of ``length`` bits,
    and each read copies a template with every bit flipped independently
    with probability ``error_rate``. Two reads of the same template differ
    in a bit with probability x = 2 p (1 - p), two reads of different
    templates with probability 1/2, so for reads at Hamming distance d

        f0 = C(L, d) x**d (1 - x)**(L - d),    f1 = C(L, d) / 2**L,

    and the log likelihood ratio is ``log f0 / f1 = d log x + (L - d)
    log(1 - x) + L log 2``. The paper samples N = 10 K reads from the
    templates uniformly at random; here every template gets exactly
    ``reads_per_template`` reads, so the true number of clusters is
    ``n_templates`` (unless two random templates coincide, which for the
    default 30 bits and a few dozen templates essentially never happens).

    Parameters
    ----------
    n_templates : int
        Number of templates K (the true clusters).
    length : int, default=30
        Bits per template L.
    reads_per_template : int, default=10
        Reads of each template.
    error_rate : float, default=0.05
        Probability p that a read flips a bit, in (0, 0.5).
    shuffle : bool, default=True
        Shuffle the reads; otherwise they come template by template.
    random_state : int, RandomState instance or None, default=None
        Seed.

    Returns
    -------
    reads : ndarray of shape (n_templates * reads_per_template, length)
        The reads, 0/1 as uint8.
    labels : ndarray of shape (n_templates * reads_per_template,)
        Template of each read.
    log_likelihood_ratio : ndarray of shape (n_reads, n_reads)
        ``log f0(i, j) / f1(i, j)``, symmetric, zero diagonal: the input of
        :class:`~sktrellis.baselines.TransitivePropagation` and of
        ``CorrelationClustering(affinity="precomputed")``.

    See Also
    --------
    sktrellis.baselines.TransitivePropagation : The method these data were made for.

    References
    ----------
    V. Kumar, D. Levy. Clustering by transitive propagation. arXiv
    1506.03072, 2015.

    Examples
    --------
    >>> import numpy as np
    >>> from sktrellis.datasets import make_bit_patterns
    >>> reads, labels, llr = make_bit_patterns(3, reads_per_template=4, random_state=0)
    >>> reads.shape, labels.shape, llr.shape
    ((12, 30), (12,), (12, 12))
    >>> same = labels[:, None] == labels[None, :]
    >>> off_diagonal = ~np.eye(len(labels), dtype=bool)
    >>> bool((llr[same & off_diagonal] > 0).all()), bool((llr[~same] < 0).all())
    (True, True)
    """
    rng = check_random_state(random_state)
    templates = rng.randint(2, size=(n_templates, length)).astype(np.uint8)
    labels = np.repeat(np.arange(n_templates), reads_per_template)
    if shuffle:
        labels = labels[rng.permutation(len(labels))]
    errors = (rng.random_sample((len(labels), length)) < error_rate).astype(np.uint8)
    reads = templates[labels] ^ errors
    bits = reads.astype(np.int64)
    distance = bits @ (1 - bits).T + (1 - bits) @ bits.T
    x = 2.0 * error_rate * (1.0 - error_rate)
    log_likelihood_ratio = (
        distance * np.log(x) + (length - distance) * np.log1p(-x) + length * np.log(2.0)
    )
    np.fill_diagonal(log_likelihood_ratio, 0.0)
    return reads, labels, log_likelihood_ratio


@validate_params(
    {
        "n_samples": [Interval(Integral, 1, None, closed="left")],
        "n_features": [Interval(Integral, 1, None, closed="left")],
        "n_subtypes": [Interval(Integral, 1, None, closed="left")],
        "n_marked": [Interval(Integral, 0, None, closed="left")],
        "shift": [Interval(Real, 0, None, closed="left")],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=True,
)
def make_planted_subtypes(n_samples=14, n_features=3000, *, n_subtypes=3, n_marked=150,
                          shift=1.5, random_state=None):
    """Expression-like samples of a few subtypes, each marked by its own genes.

    The data of the calibration checks (``beta="auto"``, see "Reading a
    posterior" in the user guide): a gene panel in which most of the
    signal is shared and each subtype differs on a small set of genes, as
    in a cohort of tumours. Every gene has a baseline level drawn from
    N(6, 2**2), the level across samples; each sample adds N(0, 0.8**2)
    noise to every gene; each subtype then picks ``n_marked`` genes at
    random and shifts them by +``shift`` or -``shift`` (a random sign per
    gene) in its own samples. Subtypes are as equal in size as possible,
    the first ones larger, and the samples come subtype by subtype.

    Parameters
    ----------
    n_samples : int, default=14
        Number of samples (the points to cluster).
    n_features : int, default=3000
        Number of genes.
    n_subtypes : int, default=3
        Number of subtypes (the true clusters); more than ``n_samples``
        leaves the last ones empty.
    n_marked : int, default=150
        Genes shifted in each subtype, at most ``n_features``.
    shift : float, default=1.5
        Size of the shift, in the units of the genes (the noise has
        standard deviation 0.8).
    random_state : int, RandomState instance or None, default=None
        Seed.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
        The samples.
    y : ndarray of shape (n_samples,)
        The subtype of each sample, 0 to ``n_subtypes - 1``.

    See Also
    --------
    sklearn.datasets.make_blobs : Isotropic Gaussian clusters.

    Examples
    --------
    >>> import numpy as np
    >>> from sktrellis.datasets import make_planted_subtypes
    >>> X, y = make_planted_subtypes(7, 200, n_marked=20, random_state=0)
    >>> X.shape, np.bincount(y).tolist()
    ((7, 200), [3, 2, 2])
    """
    if n_marked > n_features:
        raise ValueError(
            f"n_marked={n_marked} genes cannot be chosen among n_features={n_features}; "
            "lower n_marked or raise n_features"
        )
    rng = check_random_state(random_state)
    sizes = np.full(n_subtypes, n_samples // n_subtypes)
    sizes[: n_samples % n_subtypes] += 1
    y = np.repeat(np.arange(n_subtypes), sizes)
    X = rng.normal(6.0, 2.0, size=n_features) + rng.normal(0.0, 0.8, size=(n_samples, n_features))
    for subtype in range(n_subtypes):
        genes = rng.choice(n_features, n_marked, replace=False)
        X[np.ix_(y == subtype, genes)] += rng.choice([-shift, shift], size=n_marked)
    return X, y

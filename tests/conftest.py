"""Shared fixtures: a seed fixture in the spirit of scikit-learn's global_random_seed."""
import os

import pytest


def _seeds():
    # SKTRELLIS_TESTS_GLOBAL_RANDOM_SEED="all" runs every seed-dependent test
    # with seeds 0..99; "a-b" a range; a number one seed. Default: one fixed
    # seed, so CI is reproducible while no test depends on a lucky value.
    spec = os.environ.get("SKTRELLIS_TESTS_GLOBAL_RANDOM_SEED", "42")
    if spec == "all":
        return list(range(100))
    if "-" in spec:
        low, high = (int(x) for x in spec.split("-"))
        return list(range(low, high + 1))
    return [int(spec)]


@pytest.fixture(params=_seeds())
def global_random_seed(request):
    return request.param

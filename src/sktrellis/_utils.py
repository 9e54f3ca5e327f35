"""Small helpers of the tools on the public API (metrics, plotting, tree)."""
from sklearn.pipeline import Pipeline


def final_step(estimator):
    """The last step of a (nested) Pipeline, or the estimator itself."""
    while isinstance(estimator, Pipeline):
        estimator = estimator[-1]
    return estimator


def pyplot():
    """matplotlib.pyplot, imported only when a plot is drawn, or a clear ImportError."""
    try:
        import matplotlib.pyplot as plt
    except ImportError as error:
        raise ImportError(
            "sktrellis plots need matplotlib, which is not installed: "
            "pip install matplotlib (or pip install 'sktrellis[plot]')"
        ) from error
    return plt


def axes(ax):
    """The given matplotlib axes, or the current ones."""
    return pyplot().gca() if ax is None else ax

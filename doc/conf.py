"""Sphinx configuration of the sktrellis documentation."""
import os
import sys
import warnings

from sphinx_gallery.sorting import ExplicitOrder

import sktrellis

project = "sktrellis"
author = "The sktrellis developers"
release = version = sktrellis.__version__
copyright = "2026, the sktrellis developers"

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.intersphinx",
    "sphinx.ext.mathjax",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
    "matplotlib.sphinxext.plot_directive",
]

autosummary_generate = True
autodoc_default_options = {"members": True, "inherited-members": False}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
# Every public name documents its parameters; warn (an error under -W)
# when a docstring misses a section numpydoc validates. The full validation,
# as strict as scikit-learn's, is tests/test_docstrings.py.
numpydoc_validation_checks = {"PR01", "RT01"}
# TreePosterior is a typing.Protocol: its signature is typing's (*args,
# **kwargs) and it is never constructed, so there are no parameters.
numpydoc_validation_exclude = {r"\.__init__$", r"\.set_output$", r"\.set_params$",
                               r"\.get_params$", r"\.fit_predict$", r"\.set_fit_request$",
                               r"\.get_metadata_routing$", r"\.__sklearn_tags__$",
                               r"^sktrellis\.TreePosterior$"}

intersphinx_mapping = {}  # no network at build time: keep references local

html_theme = "pydata_sphinx_theme"
html_title = "sktrellis"
html_theme_options = {"navigation_with_keys": False}

sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "download_all_examples": False,
    "remove_config_comments": True,
    "within_subsection_order": "FileNameSortKey",
    # One folder per section, in reading order rather than alphabetical.
    "subsection_order": ExplicitOrder([
        "../examples/exact_posteriors", "../examples/energies",
        "../examples/past_the_trellis", "../examples/baselines",
    ]),
}

plot_include_source = True
plot_html_show_formats = False
plot_html_show_source_link = False

exclude_patterns = ["_build", "auto_examples/*.ipynb", "auto_examples/*.py"]
templates_path = []
warnings.filterwarnings("ignore", category=UserWarning, message="Matplotlib is currently using agg")
os.environ.setdefault("MPLBACKEND", "Agg")
sys.path.insert(0, os.path.abspath("."))

"""Bayesian hierarchical clustering (Heller & Ghahramani 2005): the estimator and its parts."""

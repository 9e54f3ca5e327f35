"""Greedy and beam-search agglomeration over any merge model."""

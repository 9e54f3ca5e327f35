"""Tree conversion: the internal record, scipy linkage matrices, children_ and Newick."""

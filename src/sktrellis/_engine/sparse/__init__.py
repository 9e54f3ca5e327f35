"""The trellis dynamic programs over an explicit vertex set (the sparse trellis)."""

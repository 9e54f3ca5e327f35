"""Best-first AND/OR search over clusters with admissible bounds."""

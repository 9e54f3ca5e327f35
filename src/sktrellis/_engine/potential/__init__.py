"""Split potentials in C: the Ginkgo jet likelihood formula."""

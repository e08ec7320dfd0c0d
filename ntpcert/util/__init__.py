"""Shared infrastructure, written once: atomic output and output-path checks, progress bars,
three-valued logic, BLAS thread control, the Frobenius cosine."""

"""Benchmarks and Basilisk cross-validation tools (not part of the installed jaxsim package)."""

"""Tests of the benchmark scripts themselves (their tables, JSON and issue rows); the product's tests are
in `tests/`, which imports nothing from `benchmarks/`."""

"""Basilisk reference builders: the scenarios that the cross-validation tests run in live Basilisk
(the `crossval` extra) and that generated the stored references of `tests/data`; the benchmarks
import them from here (`from tests.reference import basilisk_scenarios`)."""

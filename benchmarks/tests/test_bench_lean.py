"""bench_lean's issue table: each row's target read from the figures (a table, not a timing)."""

from benchmarks import bench_lean as bl


def test_bench_issue_table_from_results():
    fw = {"lean": {"run_s": 1.5e-3, "over_heyoka": 21.0}, "lean jit": {"run_s": 1.0e-3,
          "over_heyoka": 14.0}, "floor": {"run_s": 0.9e-3, "over_heyoka": 12.6,
          "us_per_step": 1.1}, "heyoka_at_equal_error_s": 7e-5}  # fmt: skip
    cb = {"n_parameters": 153, "reverse_over_forward": 3.5, "jvp_over_forward": 1.2,
          "forward_over_basilisk": 0.1, "simulate_over_basilisk": 0.11,
          "forward_us_per_step": 4.0, "basilisk_us_per_step": 40.0}  # fmt: skip
    rows = bl.issue_table({"forward": fw, "combined": cb})
    met = {r["figure"].split(" (")[0]: r["met"] for r in rows}
    assert met["J2 day forward, equal final error"] is False  # 14x > 3x
    assert met["`combined` reverse gradient / forward"] is True  # 3.5x <= 4x
    assert met["`combined` per step / Basilisk"] is False  # 0.1 > 0.08
    assert met["forward mode on the RK4 path, one tangent / forward"] is True

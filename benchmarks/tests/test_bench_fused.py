"""`benchmarks/bench_fused.py`: the kernel counter, the check line, the CI-log parser and the table
writer (every figure of issue #19 gets a row, measured or not)."""

import json

import jax.numpy as jnp

from benchmarks import bench_fused as bf


def test_counter_counts_fusions_and_dots_at_kernel_level():
    # Two matrix products (dots) and elementwise work around them (fusions); nothing inside a
    # fused computation or a reducer is counted twice.
    def f(a, b, x):
        return jnp.tanh(a @ (jnp.sin(b) @ x)) + jnp.sum(x)

    a = jnp.ones((40, 40))
    c = bf.count_kernels(f, a, a, jnp.ones(40))
    assert c["kernels"] == c["fusions"] + c["dots"]
    assert c["fusions"] >= 1 and c["kernels"] >= 2
    assert "parameter" not in c["other"]


def test_counter_on_a_small_spacecraft_and_loop_bodies():
    from effectors.scenarios import combined

    sc, y0, _ = combined(state_effectors=False)
    drift = bf.count_kernels(lambda m, t, y: m.drift(t, y, None), sc, 0.0, y0)
    assert 1 <= drift["kernels"] < 200
    # A loop's body runs as kernels too: a scan of the drift counts at least the drift's kernels.
    import jax

    def loop(m, y, n):  # a trip count known at run time only: XLA keeps the loop
        return jax.lax.fori_loop(0, n, lambda i, v: m.drift(0.0, v, None), y)

    looped = bf.count_kernels(loop, sc, y0, 3)
    import jaxsim as js

    if js.small_loops().effective:
        # jaxsim's options (the default): XLA compiles this small loop as one function (docs/engine.md, "Loop
        # speed on the CPU"): one `call` runs at kernel level and no `while` (the loop-invariant
        # part of the body stays outside it, as kernels).
        assert looped["other"].get("call") == 1 and "while" not in looped["other"]
    else:  # JAXSIM_SMALL_LOOPS=0: the loop's body runs kernel by kernel
        assert looped["other"].get("while") == 1
        assert looped["kernels"] >= drift["kernels"] - 2


def test_kernel_check_line():
    assert bf.kernel_check(56, 20) == ("kernel_check: 56 <= 20: FAIL", False)
    assert bf.kernel_check(20, 20) == ("kernel_check: 20 <= 20: ok", True)


def test_ci_log_takes_the_default_run():
    log = "\n".join(
        [
            "tests/test_a.py ....",
            "========== 738 passed, 4 skipped, 10 deselected in 850.77s (0:14:10) ===========",
            "collected 752 items / 742 deselected / 10 selected",
            "================ 10 passed, 742 deselected in 119.80s (0:01:59) ================",
        ]
    )
    r = bf.ci_wall_time(log)
    assert r["seconds"] == 850.77 and r["tests"] == 738
    assert abs(r["value"] - 850.77 / 60) < 1e-12
    assert "skipped" in bf.ci_wall_time("no summary here")


FAKE_COUNTS = {"fusions": 30, "dots": 2, "kernels": 32, "other": {"copy": 1}}


def test_table_has_every_figure(tmp_path, monkeypatch):
    measured = {k: {"value": 1} for k in bf.ROWS[:3]}
    measured["batch_speedup"] = {"skipped": "Basilisk (bsk) not importable"}
    rows = bf.table_rows({"rows": measured})
    assert [r["key"] for r in rows] == list(bf.ROWS)
    by = {r["key"]: r for r in rows}
    assert by["kernels"]["measured"] == "1" and by["kernels"]["met"] == "yes"
    assert by["combined_ratio"]["met"] == "no"  # 1 > 0.10
    assert (
        by["batch_speedup"]["measured"].startswith("Basilisk") and by["batch_speedup"]["met"] == "-"
    )
    assert by["ci_wall_min"]["measured"] == "not measured in this run"
    # The whole writer on a run with the kernel row (counts stubbed: the counter is tested above)
    # and the CI log.
    names = ("combined_drift", "combined_rk4_step", "slew_fsw_tick")
    monkeypatch.setattr(bf, "kernel_counts", lambda: dict.fromkeys(names, FAKE_COUNTS))
    log = tmp_path / "ci.log"
    log.write_text("===== 5 passed in 60.00s =====\n")
    rc = bf.main(["--only", "kernels", "ci_wall_min", "--ci-log", str(log), "--out", str(tmp_path),
                  "--check", "--max-kernels", "32"])  # fmt: skip
    assert rc == 0
    data = json.loads((tmp_path / "fused.json").read_text())
    md = (tmp_path / "fused.md").read_text()
    assert data["kernel_check"].startswith("kernel_check: ") and data["kernel_check"] in md
    assert set(data["kernels"]) == set(names) and data["kernel_check"].endswith("32 <= 32: ok")
    assert "| figure | measured | target | met |" in md
    for figure, *_ in bf.FIGURES.values():
        assert f"| {figure} |" in md
    assert "| 1 min | <= 15 min | yes |" in md
    assert (
        bf.main(["--only", "kernels", "--out", str(tmp_path), "--check", "--max-kernels", "31"])
        == 1
    )

"""`benchmarks/bench_gpu.py` in `--quick` mode (CPU): result schema, the batched-equals-unbatched
check and the cross-device `--compare` of final states."""

import copy
import json

import pytest

from benchmarks import bench_gpu as bg


ROW_KEYS = {"mode", "members", "dtype", "member_steps_per_s", "compile_s", "run_s", "chunk_size"}
# A perturbation the cross-device comparison must catch: 1e3 x its tolerance.
PERTURBATION = 1e3 * bg.REL_TOL


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench_gpu")
    rc = bg.main(["--quick", "--no-grad", "--out", str(out)])
    return rc, json.loads((out / "gpu.json").read_text()), (out / "gpu.md").read_text(), out


def test_quick_run_schema_and_checks(quick):
    rc, data, md, _ = quick
    assert rc == 0
    assert data["name"] == "gpu" and data["dtype"] == "float64" and "partial" not in data
    assert data["device_kind"] and data["environment"]["jax"] and data["environment"]["x64"]
    assert data["horizon_s"] == bg.QUICK["horizon"]
    assert data["n_steps"] == round(bg.QUICK["horizon"] / bg.DT)
    modes = [r["mode"] for r in data["rows"]]
    assert modes == ["single"] + ["vmap"] * len(bg.QUICK["sizes"])
    for r in data["rows"]:
        assert ROW_KEYS <= set(r), r
        assert r["dtype"] == "float64" and r["run_s"] > 0 and r["member_steps_per_s"] > 0
    vmap = [r for r in data["rows"] if r["mode"] == "vmap"]
    assert [r["members"] for r in vmap] == list(bg.QUICK["sizes"])
    # 5 members in chunks of 2: 3 calls of one compiled program (the second size compiles nothing).
    assert [r["n_chunks"] for r in vmap] == [1, 3] and vmap[1]["compile_s"] == 0.0
    for r in vmap:
        assert r["all_successful"]
        assert r["member_steps_per_s"] == pytest.approx(r["members"] * r["n_steps"] / r["run_s"])
    ch = data["checks"]
    assert ch["batched_equals_single"] and ch["all_successful"]
    assert ch["batched_vs_single_max_rel"] <= bg.REL_TOL
    fixed = data["fixed_members"]["members"]
    assert sorted(fixed, key=int) == [str(i) for i in bg.FIXED]
    for m in fixed.values():
        assert set(m["params"]) == set(bg.PARAMS)
        assert {"hub/r_BN_N", "hub/sigma_BN", "rw/Omega", "panels/theta"} <= set(m["final_state"])
    assert "| vmap | 5 | 2 | 3 |" in md and "**True**" in md


def test_compare_detects_a_perturbed_final_state(quick):
    _, data, _, _ = quick
    same = bg.compare(data, copy.deepcopy(data))
    assert same["equal"] and same["max_rel"] == 0.0 and same["params_equal"]
    other = copy.deepcopy(data)
    m = other["fixed_members"]["members"]["2"]
    m["final_state"]["hub/sigma_BN"][1] += PERTURBATION * m["scale"]["hub/sigma_BN"]
    bad = bg.compare(data, other)
    assert not bad["equal"] and bad["worst_leaf"] == "hub/sigma_BN"
    assert bad["max_rel"] == pytest.approx(PERTURBATION, rel=1e-3)
    other = copy.deepcopy(data)
    other["fixed_members"]["members"]["0"]["params"]["mass"] *= 1.0 + 1e-15
    assert not bg.compare(data, other)["params_equal"]


def test_compare_option_refuses_another_horizon(quick, tmp_path):
    _, data, _, _ = quick
    other = copy.deepcopy(data)
    other["fixed_members"]["horizon_s"] = 600.0
    path = tmp_path / "other.json"
    path.write_text(json.dumps(other))
    with pytest.raises(SystemExit):
        bg.main(["--quick", "--no-grad", "--compare", str(path), "--out", str(tmp_path)])


@pytest.mark.slow  # the reverse-mode compile alone takes 15-40 s on the shared 2-core machine
def test_quick_run_with_gradient_and_compare(tmp_path, quick):
    _, data, _, out = quick
    rc = bg.main(["--quick", "--out", str(tmp_path), "--compare", str(out / "gpu.json")])
    assert rc == 0
    new = json.loads((tmp_path / "gpu.json").read_text())
    grad = [r for r in new["rows"] if r["mode"] == "grad vmap"]
    assert len(grad) == 1 and grad[0]["all_successful"]
    assert grad[0]["members"] == bg.QUICK["grad_members"] and grad[0]["dtype"] == "float64"
    # Same machine, same programs: the comparison with the first run is exact.
    assert new["compare"]["equal"] and new["compare"]["max_rel"] == 0.0


def test_rows_are_written_as_they_are_measured(tmp_path, monkeypatch):
    """A run cut short (a device time limit) leaves the rows measured so far in the JSON."""
    row = {"mode": "single", "members": 1, "run_s": 1.0}

    def cut_short(*args):
        args[-1]([row])  # on_row
        raise RuntimeError("time limit")

    monkeypatch.setattr(bg, "run", cut_short)
    with pytest.raises(RuntimeError, match="time limit"):
        bg.main(["--quick", "--out", str(tmp_path)])
    part = json.loads((tmp_path / "gpu.json").read_text())
    assert part["partial"] and part["rows"] == [row] and part["device_kind"]

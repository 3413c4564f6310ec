"""Benchmark: rigid hub + point-mass gravity + gravity-gradient torque, jaxsim vs Basilisk.

The model is the `gravity_gradient` reference scenario (`tests/data/gravity_gradient.json`: 750 kg hub
with non-diagonal inertia in an elliptic LEO, Earth point mass, gravity-gradient torque), run for one
orbit (5830 s) with classical RK4 in two variants:

- `gg_1s`: 5830 steps at 1 s (the reference scenario itself),
- `gg_0.1s`: 58300 steps at 0.1 s (the step of the `combined` benchmark model),

each in two modes, timed side by side in this process:

- `samples+outputs`: samples every 10 s with derived outputs and energy/momentum
  (jaxsim `simulate(..., sample_dt=10.0)`; Basilisk with message recorders and the energy logger),
- `final state`: only the final state (jaxsim `simulate(..., outputs=False)` with `ts=[t0, t1]`;
  Basilisk with no recorders, state read from the output message).

jaxsim is timed through the public `jaxsim.simulate` with `jax.block_until_ready`: the first call
(trace + compile + run) and the fastest of repeated calls (run); compile time = first - run. Basilisk
is timed on `ExecuteSimulation()` alone (best of fresh builds). The ratio is jaxsim run time /
Basilisk run time (< 1: jaxsim faster). The samples of both codes are also compared (max relative
difference of r/v, max absolute difference of sigma/omega) as a sanity check.

Run: `python -m benchmarks.bench_hub` (writes `benchmarks/results/hub.json` and `hub.md`).
Without Basilisk (`bsk`) installed the Basilisk columns are skipped with a note.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np


sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # also runnable as a script

from benchmarks import _common as cm
from tests.reference import basilisk_scenarios as bs  # noqa: E402


NAME = "hub"
TITLE = "Hub + point-mass gravity + gravity gradient (one orbit, RK4)"
SAMPLE_DT = 10.0
VARIANTS = (("gg_1s", 1.0), ("gg_0.1s", 0.1))


def build_jaxsim(spec):
    """`(spacecraft, y0)` of the spec in jaxsim."""
    import effectors as fx

    mu = spec["gravity"]["mu_m3ps2"]
    h = spec["hub"]
    earth = fx.PointMassGravity(mu, name="earth")
    sc = fx.Spacecraft(
        fx.Hub(h["mHub_kg"], h["IHubPntBc_B_kgm2"], h["r_BcB_B_m"]),
        gravity=(earth,),
        dynamic_effectors=(fx.GravityGradient(earth),),
    )
    ic = spec["initial_conditions"]
    y0 = sc.init_state(ic["r_CN_N_m"], ic["v_CN_N_mps"], ic["sigma_BN"], ic["omega_BN_B_radps"])
    return sc, y0


def _time_basilisk(spec, dt, record, repeats):
    walls, scen = [], None
    for _ in range(repeats):
        scen = bs.BasiliskScenario(spec, step=dt, record=record)
        walls.append(scen.run())
    return min(walls), scen


def _diffs(sol, out):
    d = {}
    for k in ("r_BN_N", "v_BN_N"):
        a, b = np.asarray(sol.outputs[k]), out[k]
        # Per component (Basilisk's isArrayEqualRelative; inflated where a component crosses zero)
        # and per sample vector norm.
        d[f"max_rel_{k}"] = float(np.max(np.abs(a - b) / np.abs(b)))
        d[f"max_normrel_{k}"] = float(
            np.max(np.linalg.norm(a - b, axis=1) / np.linalg.norm(b, axis=1))
        )
    for k in ("sigma_BN", "omega_BN_B"):
        a, b = np.asarray(sol.outputs[k]), out[k]
        d[f"max_abs_{k}"] = float(np.max(np.abs(a - b)))
    d["mrp_switches_jaxsim"] = int(np.asarray(sol.counts["mrp_switches"])[-1])
    d["mrp_switches_bsk"] = int(out["MRPSwitchCount"][-1])
    return d


def run(quick: bool = False) -> dict:
    import jaxsim as js

    spec = bs.load_spec("gravity_gradient")
    t1 = float(spec["time"]["duration_s"])
    sc, y0 = build_jaxsim(spec)
    have_bsk = bs.available()
    rows, accuracy = [], {}
    variants = VARIANTS[:1] if quick else VARIANTS
    for label, dt in variants:
        n = int(round(t1 / dt))
        reps_j = 5 if n <= 10_000 else 3
        reps_b = 3 if n <= 10_000 else 1  # a 58300-step Basilisk run takes seconds
        modes = (
            ("samples+outputs", dict(sample_dt=SAMPLE_DT), True),
            ("final state", dict(outputs=False), False),
        )
        for mode, kw, record in modes:
            tj = cm.time_jax(lambda: js.simulate(sc, y0, t1, dt=dt, **kw), repeats=reps_j)
            row = {
                "case": label,
                "mode": mode,
                "n_steps": n,
                "dt_s": dt,
                "jaxsim_compile_s": tj["compile_s"],
                "jaxsim_first_call_s": tj["first_call_s"],
                "jaxsim_run_s": tj["run_s"],
                "jaxsim_run_median_s": tj["run_median_s"],
                "jaxsim_us_per_step": tj["run_s"] / n * 1e6,
            }
            if have_bsk:
                wall, scen = _time_basilisk(spec, dt, record, reps_b)
                row["bsk_run_s"] = wall
                row["bsk_us_per_step"] = wall / n * 1e6
                row["ratio_jaxsim_over_bsk"] = tj["run_s"] / wall
                if record:
                    accuracy[label] = _diffs(tj["result"], scen.outputs())
                else:
                    fin = scen.final_state()
                    yj = tj["result"].ys["hub"]
                    accuracy[label + " final"] = {
                        "max_rel_r_BN_N": float(
                            np.max(
                                np.abs(np.asarray(yj["r_BN_N"][-1]) - fin["r_BN_N"])
                                / np.abs(fin["r_BN_N"])
                            )
                        ),
                        "max_abs_sigma_BN": float(
                            np.max(np.abs(np.asarray(yj["sigma_BN"][-1]) - fin["sigma_BN"]))
                        ),
                    }
            rows.append(row)
            print(
                f"{label:8s} {mode:16s} n={n:6d}  jaxsim {row['jaxsim_us_per_step']:8.2f} us/step "
                f"(compile {row['jaxsim_compile_s']:.1f} s)"
                + (
                    f"  Basilisk {row['bsk_us_per_step']:8.2f} us/step  ratio "
                    f"{row['ratio_jaxsim_over_bsk']:.3f}"
                    if have_bsk
                    else "  Basilisk: skipped (bsk not installed)"
                ),
                flush=True,
            )
    data = {
        "name": NAME,
        "title": TITLE,
        "environment": cm.environment(),
        "basilisk": bs.version() if have_bsk else None,
        "note": None if have_bsk else "Basilisk (bsk) not importable: Basilisk columns skipped",
        "rows": rows,
        "accuracy_vs_basilisk": accuracy,
    }
    return data


def to_markdown(data: dict) -> str:
    env = data["environment"]
    cols = [
        ("case", "case"),
        ("mode", "mode"),
        ("n_steps", "steps"),
        ("dt_s", "dt [s]"),
        ("jaxsim_us_per_step", "jaxsim [us/step]"),
        ("jaxsim_compile_s", "jaxsim compile [s]"),
        ("bsk_us_per_step", "Basilisk [us/step]"),
        ("ratio_jaxsim_over_bsk", "jaxsim/Basilisk"),
    ]
    md = [f"## {data['title']}", ""]
    md.append(
        f"jax {env['jax']} ({env['jax_backend']}, x64={env['x64']}), Basilisk "
        f"{data['basilisk'] or 'not installed'}, {env['cpu_count']} CPUs, "
        f"1-min load {env.get('loadavg_1m', float('nan')):.1f} at {env['time']}."
    )
    if data["note"]:
        md += ["", f"**Note:** {data['note']}."]
    md += ["", cm.markdown_table(data["rows"], cols), ""]
    md.append(
        "jaxsim: `jaxsim.simulate`, fastest repeated call after a first (compiling) call; "
        "Basilisk: `ExecuteSimulation()` only, best of fresh builds. "
        "`samples+outputs`: 10 s samples with outputs/energies (Basilisk: recorders + energy logger); "
        "`final state`: no samples (Basilisk: no recorders)."
    )
    if data["accuracy_vs_basilisk"]:
        md += ["", "Agreement with the live Basilisk run:", ""]
        for k, v in data["accuracy_vs_basilisk"].items():
            md.append(f"- `{k}`: " + ", ".join(f"{a} {cm.fmt(b)}" for a, b in v.items()))
    return "\n".join(md)


def main(argv=None) -> int:
    return cm.main(
        NAME, TITLE, lambda a: run(quick=a.quick), to_markdown, argv, quick="only the 1 s variant"
    )


if __name__ == "__main__":
    raise SystemExit(main())

"""Benchmark: the same spacecraft as a MuJoCo scene (MJX drift) and as a back-substitution
`Spacecraft`.

The model is the `hinged_panels_undamped` reference scenario (`tests/data`: 750 kg hub with a CoM
offset, two hinged panels with torsional springs, no gravity), rebuilt as MJCF by
`tests/effectors/_mjcf.py` (free-joint hub, hinge joints with stiffness). Both run 10 s with RK4 at
10 ms (1000 steps), samples every 0.1 s with outputs and energy/momentum, through the public
`jaxsim.simulate`: first call (trace + compile + run) and fastest repeated call; compile = first -
run. The two runs' hub MRPs are compared as a sanity check (they agree to the RK4 truncation error).

Run: `JAXSIM_CACHE=0 python -m benchmarks.bench_mujoco_scene` (no compilation cache; writes `benchmarks/results/mujoco_scene.json` and
`mujoco_scene.md`). Needs the `mujoco` extra; without it the results record a note and no rows.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

import numpy as np


sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # also runnable as a script

from benchmarks import _common as cm  # noqa: E402


NAME = "mujoco_scene"
TITLE = "Hub + 2 hinged panels: MuJoCo scene (MJX) vs back-substitution Spacecraft (10 s, RK4)"
T1, DT, SAMPLE_DT = 10.0, 0.01, 0.1


def build():
    """`{label: (model, y0)}` for the scene and the spacecraft."""
    import effectors as fx
    from tests.effectors._mjcf import panels_mjcf, scene_state
    from tests.effectors.test_hinged_rigid_bodies import panels_from_spec
    from tests.helpers import hub_from_spec, initial_state, load_reference

    spec, ref = load_reference("hinged_panels_undamped")
    P = spec["effectors"][0]["panels"]
    scene = fx.MuJoCoScene(panels_mjcf(spec))
    y_scene = scene_state(
        scene, spec, ref, [p["theta0_rad"] for p in P], [p["thetaDot0_radps"] for p in P]
    )
    sc = fx.Spacecraft(hub_from_spec(spec), state_effectors=[panels_from_spec(spec)])
    return {"MuJoCoScene": (scene, y_scene), "Spacecraft": (sc, initial_state(sc, spec))}


def run(repeats: int = 5) -> dict:
    import jaxsim as js

    n = int(round(T1 / DT))
    rows, sigma = [], {}
    for label, (model, y0) in build().items():
        tj = cm.time_jax(
            lambda: js.simulate(model, y0, T1, dt=DT, sample_dt=SAMPLE_DT), repeats=repeats
        )
        out = tj["result"].outputs
        sigma[label] = np.asarray(
            out["bodies"]["sigma_BN"][:, 0] if label == "MuJoCoScene" else out["sigma_BN"]
        )
        rows.append(
            {
                "model": label,
                "n_steps": n,
                "compile_s": tj["compile_s"],
                "first_call_s": tj["first_call_s"],
                "run_s": tj["run_s"],
                "run_median_s": tj["run_median_s"],
                "us_per_step": tj["run_s"] / n * 1e6,
            }
        )
        print(
            f"{label:12s} {rows[-1]['us_per_step']:9.1f} us/step  compile {tj['compile_s']:.1f} s"
        )
    rows[0]["ratio_over_spacecraft"] = rows[0]["run_s"] / rows[1]["run_s"]
    diff = float(np.max(np.abs(sigma["MuJoCoScene"] - sigma["Spacecraft"])))
    return {"rows": rows, "max_abs_sigma_diff": diff}


def to_markdown(data: dict) -> str:
    env = data["environment"]
    md = [f"## {data['title']}", ""]
    md.append(
        f"jax {env['jax']} ({env['jax_backend']}, x64={env['x64']}), mujoco-mjx "
        f"{data.get('mujoco') or 'not installed'}, {env['cpu_count']} CPUs, "
        f"1-min load {env.get('loadavg_1m', float('nan')):.1f} at {env['time']}."
    )
    if data.get("note"):
        md += ["", f"**Note:** {data['note']}."]
        return "\n".join(md)
    cols = [
        ("model", "model"),
        ("n_steps", "steps"),
        ("us_per_step", "run [us/step]"),
        ("compile_s", "compile [s]"),
        ("ratio_over_spacecraft", "scene/Spacecraft"),
    ]
    md += ["", cm.markdown_table(data["rows"], cols), ""]
    md.append(
        "Fastest repeated `jaxsim.simulate` call after a first (compiling) call; samples every "
        f"0.1 s with outputs. Hub MRPs of the two runs differ by at most "
        f"{cm.fmt(data['max_abs_sigma_diff'])} (RK4 truncation in different coordinates)."
    )
    return "\n".join(md)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=TITLE)
    p.add_argument("--quick", action="store_true", help="2 repeated calls instead of 5")
    a = p.parse_args(argv)
    t0 = time.perf_counter()
    import jaxsim  # noqa: F401  (float64 on before `environment()` records it)

    data = {"name": NAME, "title": TITLE, "environment": cm.environment(), "rows": []}
    if importlib.util.find_spec("mujoco") is None:
        data["note"] = (
            "mujoco / mujoco-mjx not installed (pip install 'jaxsim-spacecraft[mujoco]'): skipped"
        )
    else:
        from importlib.metadata import version

        data["mujoco"] = version("mujoco-mjx")
        data.update(run(repeats=2 if a.quick else 5))
    data["wall_s"] = time.perf_counter() - t0
    pj, pm = cm.write_results(NAME, data, to_markdown(data))
    print(f"wrote {pj} and {pm} ({data['wall_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

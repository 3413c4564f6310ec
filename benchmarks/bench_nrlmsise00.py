r"""Benchmark (issue 44): compile time and evaluation cost of the NRLMSISE-00 atmosphere against the
exponential atmosphere.

Cases, each atmosphere in turn (`exponential`: `ExponentialAtmosphere` 1.217 kg/m^3, 8500 m;
`nrlmsise00`: `NRLMSISE00Atmosphere` at 2000-07-14 06:00 UTC with the shipped 2000 space-weather
file, 3-hourly Ap history), each compile figure the first call in a fresh Python process (the
model built before the clock starts), the fastest of `--repeats` processes:

- `drift`: `spacecraft.drift` jitted (the model's arrays as arguments) for a hub in a 400 km orbit with point-mass gravity and
  `Drag`: trace + lower and XLA compile (`compile_s`), HLO size; the issue's "first compile of a
  drift using it <= 5 s" is `trace_lower_s + compile_s`;
  with `jaxsim.compiler_options()` (what `simulate` compiles with; `drift_xla_defaults`: plain
  `jax.jit`, XLA's fusion emitters, for comparison);
- `simulate`: the first `js.simulate` call (RK4, 10 s steps, 600 s, outputs every 60 s), as a
  user makes it (`first_call_s`), and the warm call;
- `eval` (with `jaxsim.compiler_options()`): the jitted density at one point (`run_s` per call, the fastest of 200) and `vmap`ped
  over 10,000 points (`per_point_us`), plus the jitted gradient of the density with respect to
  the position at one point.

Run: `python -m benchmarks.bench_nrlmsise00 [--repeats N] [--markdown-only]` (about 3 minutes on 2 idle cores;
absolute times scale with the machine's load, recorded beside each row); writes
`benchmarks/results/nrlmsise00.json` and `.md`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
if __package__ in (None, ""):
    sys.path.insert(0, str(ROOT))

from benchmarks._common import environment, fmt, write_results  # noqa: E402


ATMOSPHERES = ("exponential", "nrlmsise00")
CASES = ("drift", "drift_xla_defaults", "simulate", "eval")
TARGET_DRIFT_S = 5.0  # issue 44: first compile of a drift using NRLMSISE-00
SPACE_WEATHER = ROOT / "tests" / "data" / "space_weather_2000.csv"


def _atmosphere(kind):
    import effectors as fx

    if kind == "exponential":
        return fx.ExponentialAtmosphere.from_body(fx.astro.EARTH, 1.217, 8500.0)
    epoch = fx.astro.Epoch("2000-07-14T06:00:00Z")
    sw = fx.SpaceWeather.from_csv(SPACE_WEATHER, epoch, "2000-07-16")
    return fx.NRLMSISE00Atmosphere(epoch, sw)


def _spacecraft(kind):
    import numpy as np

    import effectors as fx

    drag = fx.Drag(_atmosphere(kind), Cd=2.2, area=4.0)
    sc = fx.Spacecraft(
        fx.Hub(500.0, np.eye(3) * 100.0),
        dynamic_effectors=[drag],
        gravity=[fx.PointMassGravity(fx.astro.EARTH, central=True)],
    )
    r0 = fx.astro.EARTH.radius_equatorial + 400e3  # [m]
    v0 = np.sqrt(fx.astro.EARTH.mu / r0)
    return sc, sc.init_state([r0, 0.0, 0.0], [0.0, v0 * np.cos(0.9), v0 * np.sin(0.9)])


def _child(kind: str, case: str) -> dict:
    """One case in this (fresh) process."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    import jaxsim as js

    out = {"atmosphere": kind, "case": case}
    if case in ("drift", "drift_xla_defaults"):
        import equinox as eqx

        sc, y0 = _spacecraft(kind)
        params, static = eqx.partition(sc, eqx.is_array)
        drift = jax.jit(
            lambda p, t, y: eqx.combine(p, static).drift(t, y, {}),
            compiler_options=js.compiler_options() if case == "drift" else {},
        )
        t0 = time.perf_counter()
        lowered = drift.lower(params, 0.0, y0)
        t1 = time.perf_counter()
        compiled = lowered.compile()
        t2 = time.perf_counter()
        jax.block_until_ready(compiled(params, 0.0, y0))
        out.update(trace_lower_s=t1 - t0, compile_s=t2 - t1,
                   hlo_lines=lowered.as_text().count("\n"))  # fmt: skip
        out["drift_compile_s"] = out["trace_lower_s"] + out["compile_s"]
    elif case == "simulate":
        sc, y0 = _spacecraft(kind)
        t0 = time.perf_counter()
        sol = js.simulate(sc, y0, 600.0, dt=10.0, sample_dt=60.0)
        jax.block_until_ready(sol.ys)
        out["first_call_s"] = time.perf_counter() - t0
        warm = []
        for _ in range(3):
            t0 = time.perf_counter()
            jax.block_until_ready(js.simulate(sc, y0, 600.0, dt=10.0, sample_dt=60.0).ys)
            warm.append(time.perf_counter() - t0)
        out["warm_s"] = min(warm)
    else:
        atm = _atmosphere(kind)
        r = jnp.array([6778137.0, 0.0, 0.0])
        opts = js.compiler_options()  # as `simulate` compiles
        f = jax.jit(lambda t, r: atm.density_at(t, r), compiler_options=opts)
        jax.block_until_ready(f(0.0, r))
        runs = []
        for i in range(200):
            t0 = time.perf_counter()
            jax.block_until_ready(f(float(i), r))
            runs.append(time.perf_counter() - t0)
        out["single_call_us"] = min(runs) * 1e6
        n = 10_000
        rng = np.random.default_rng(0)
        u = rng.normal(size=(n, 3))
        rs = jnp.asarray(
            u / np.linalg.norm(u, axis=1, keepdims=True) * rng.uniform(6.5e6, 7.3e6, (n, 1))
        )
        ts = jnp.asarray(rng.uniform(0.0, 86400.0, n))
        fv = jax.jit(jax.vmap(lambda t, r: atm.density_at(t, r)), compiler_options=opts)
        jax.block_until_ready(fv(ts, rs))
        runs = []
        for _ in range(5):
            t0 = time.perf_counter()
            jax.block_until_ready(fv(ts, rs))
            runs.append(time.perf_counter() - t0)
        out["per_point_us"] = min(runs) / n * 1e6
        g = jax.jit(jax.grad(lambda r: atm.density_at(0.0, r)), compiler_options=opts)
        t0 = time.perf_counter()
        jax.block_until_ready(g(r))
        out["grad_first_call_s"] = time.perf_counter() - t0
        runs = []
        for _ in range(200):
            t0 = time.perf_counter()
            jax.block_until_ready(g(r))
            runs.append(time.perf_counter() - t0)
        out["grad_call_us"] = min(runs) * 1e6
    out["loadavg_1m"] = os.getloadavg()[0]
    return out


def run(repeats: int) -> list[dict]:
    rows = []
    for case in CASES:
        for kind in ATMOSPHERES:
            best = None
            for _ in range(repeats if case != "eval" else 1):
                proc = subprocess.run(
                    [sys.executable, "-m", "benchmarks.bench_nrlmsise00", "--child", kind, case],
                    cwd=ROOT, capture_output=True, text=True, check=True,
                )  # fmt: skip
                row = json.loads(proc.stdout.strip().splitlines()[-1])
                key = {"drift": "drift_compile_s", "drift_xla_defaults": "drift_compile_s",
                       "simulate": "first_call_s"}.get(case)  # fmt: skip
                if best is None or (key and row[key] < best[key]):
                    best = row
            rows.append(best)
            print(json.dumps(best), flush=True)
    return rows


def _table(headers, rows) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def markdown(rows) -> str:
    head = (
        "## NRLMSISE-00 against the exponential atmosphere (issue 44)\n\n"
        "Fresh process per figure (fastest of the repeats); 2 cores shared with other work: the "
        "load average (1 min) is beside each row and absolute times scale with it.\n\n"
    )
    drift = [r for r in rows if r["case"] in ("drift", "drift_xla_defaults")]
    sim = [r for r in rows if r["case"] == "simulate"]
    ev = [r for r in rows if r["case"] == "eval"]
    out = head + "### First compile of the drift (`spacecraft.drift` under `jax.jit`)\n\n"
    out += _table(
        ["atmosphere", "compile options", "trace+lower [s]", "XLA compile [s]", "total [s]", "target", "HLO lines", "load"],
        [[r["atmosphere"], "jaxsim" if r["case"] == "drift" else "XLA defaults", fmt(r["trace_lower_s"]), fmt(r["compile_s"]), fmt(r["drift_compile_s"]),
          f"<= {TARGET_DRIFT_S:g}" if r["atmosphere"] == "nrlmsise00" else "-", r["hlo_lines"],
          fmt(r["loadavg_1m"])] for r in drift],
    )  # fmt: skip
    out += "\n### `js.simulate` (RK4 10 s, 600 s): first call and warm call\n\n"
    out += _table(
        ["atmosphere", "first call [s]", "warm [s]", "load"],
        [[r["atmosphere"], fmt(r["first_call_s"]), fmt(r["warm_s"]), fmt(r["loadavg_1m"])] for r in sim],
    )  # fmt: skip
    out += "\n### Evaluation cost (jitted `density_at`)\n\n"
    out += _table(
        ["atmosphere", "one point [us]", "vmap, per point [us]", "grad first call [s]",
         "grad one point [us]", "load"],
        [[r["atmosphere"], fmt(r["single_call_us"]), fmt(r["per_point_us"]),
          fmt(r["grad_first_call_s"]), fmt(r["grad_call_us"]), fmt(r["loadavg_1m"])] for r in ev],
    )  # fmt: skip
    out += (
        "\nNotes: the issue's target is the drift's first compile with the options `simulate` "
        "uses (`jaxsim` rows). `simulate`'s first call compiles a larger program: its XLA "
        "optimisation duplicates the model (a dump of the run program: 66 cosines before XLA's "
        "passes, 228 after, with two model evaluations in the outputs then), which the "
        "exponential model hardly feels; an engine matter, not this model's. Outside `simulate` a jitted `density_at` "
        "checks the space weather's span with a host callback (`eqx.error_if`): most of the "
        "one-point time; inside `simulate` the span is checked before the run and the marginal "
        "cost is (warm NRLMSISE - warm exponential) / 251 evaluations, about 15 us.\n"
    )
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--child", nargs=2)
    parser.add_argument("--markdown-only", action="store_true")
    args = parser.parse_args()
    if args.markdown_only:
        from benchmarks._common import RESULTS

        rows = json.loads((RESULTS / "nrlmsise00.json").read_text())["rows"]
        (RESULTS / "nrlmsise00.md").write_text(markdown(rows).rstrip() + "\n")
        return
    if args.child:
        print(json.dumps(_child(*args.child)))
        return
    rows = run(args.repeats)
    result = {
        "name": "nrlmsise00",
        "title": "NRLMSISE-00 against the exponential atmosphere (issue 44)",
        "environment": environment(),
        "rows": rows,
    }
    write_results("nrlmsise00", result, markdown(rows))


if __name__ == "__main__":
    main()

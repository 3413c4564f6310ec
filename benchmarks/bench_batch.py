"""Benchmark: batches of dispersed `combined` runs, one `jaxsim.jit(jax.vmap(run))`, vs Basilisk Monte Carlo.

Model: the `combined` spacecraft (`effectors.scenarios.combined`, spec `tests/data/combined.json`:
hub with CoM offset + 3 reaction wheels + 2 damped hinged panels + Earth point mass + gravity
gradient + external torque), classical RK4 at 0.1 s, final state only. Each member disperses
(Gaussian, seeded numpy draws shared by both codes) the hub mass (5 %), the three principal hub
moments of inertia (3 % each, the inertia stays diagonal as in the spec), the initial body rates
(+- 5e-4 rad/s per axis) and the initial wheel speeds (+- 5 rad/s per wheel).

jaxsim: `run(mass, moments, omega0, Omega0)` rebuilds the model with `equinox.tree_at` and
propagates it (`jaxsim.simulate(..., outputs=False, throw=False)`); `jaxsim.jit(jax.vmap(run))` is
timed for each batch size (fastest repeated call; compile = first call - run), and for batches
larger than `CHUNK` also the same members vmapped `CHUNK` at a time in one program (`jax.lax.map`
with `batch_size`; the chunking `jaxsim.montecarlo.run_batch` does across programs). Batches
larger than `RUN_BATCH_CHUNK` also run through `jaxsim.montecarlo.run_batch` (chunks of
`RUN_BATCH_CHUNK`, one worker thread per usable core: its CPU default), the way a user runs a
Monte Carlo.

Basilisk (`bsk`): the same scenario built from the dispersed spec (`tests/reference/basilisk_scenarios.py`,
RK4, no recorders), one simulation per member as Basilisk has no batch mode:

- serial: a few members in this process (after a warm-up member); `ExecuteSimulation()` time and
  the full member time (build + `InitializeSimulation` + execute);
- two processes: `multiprocessing` pool of 2 (spawn) over more members, each worker building and
  running its own simulations, wall time of the whole map (after a warm-up map that imports Basilisk
  in the workers).

Basilisk's time for 64 and 1024 members is extrapolated linearly from its measured per-member time.
The headline speedup is Basilisk's measured two-process time per member x N over jaxsim's batch
time (target of issue #4: >= 100 at N = 1024); a conservative second figure uses Basilisk's serial
`ExecuteSimulation()` time / 2 (perfect two-process scaling, no build), which is what a long horizon
tends to. The horizon is short by default (`--horizon`, 60 s = 600 steps; one orbit is 58,300
steps, far too long for 1024 members on a 2-core machine): figures are per member-step.

Each dispersed member is also checked against Basilisk (final r, sigma, omega of the members run
serially), so the two codes run the same dispersions.

Run: `python -m benchmarks.bench_batch [--horizon 60] [--sizes 1 64 1024]` (writes
`benchmarks/results/batch.json`, `.md`).
"""

from __future__ import annotations

import copy
import sys
import time
from pathlib import Path

import numpy as np


sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # also runnable as a script

from benchmarks import _common as cm
from tests.reference import basilisk_scenarios as bs  # noqa: E402


NAME = "batch"
TITLE = "Batch of dispersed `combined` runs (RK4 0.1 s): jaxsim vmap vs Basilisk Monte Carlo"
HORIZON = 60.0  # [s] default
SIZES = (1, 64, 1024)
CHUNK = 64  # members per vmapped chunk in the chunked rows (batches larger than this)
RUN_BATCH_CHUNK = 128  # members per chunk of the `run_batch` rows (one worker thread per core)
BSK_SERIAL = 4  # members run serially in Basilisk
BSK_PARALLEL = 12  # members run by the 2-process pool
TARGET_SPEEDUP = 100.0  # issue #4: 1024 runs >= 100x faster than Basilisk's two-process MC
# Dispersions (1 sigma): relative hub mass, relative principal moments, body rates, wheel speeds.
SIG_MASS, SIG_MOMENTS, SIG_OMEGA, SIG_RW = 0.05, 0.03, 5e-4, 5.0  # [-], [-], [rad/s], [rad/s]


def dispersions(n: int, seed: int = 0) -> dict:
    """`n` dispersed members (numpy float64): mass [kg], moments (n,3) [kg m^2], omega0 (n,3)
    [rad/s], Omega0 (n,3) [rad/s]; member i is the same for every n."""
    from effectors.scenarios import COMBINED

    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, 10))
    mass = COMBINED["mHub_kg"] * (1.0 + SIG_MASS * z[:, 0])
    moments = np.diag(COMBINED["IHubPntBc_B"]) * (1.0 + SIG_MOMENTS * z[:, 1:4])
    omega0 = COMBINED["omega_BN_B"] + SIG_OMEGA * z[:, 4:7]
    Omega0 = COMBINED["rw_Omega"] + SIG_RW * z[:, 7:10]
    s = np.sort(moments, axis=1)
    if not (np.all(mass > 0) and np.all(s[:, 0] + s[:, 1] > s[:, 2])):
        raise ValueError("bench_batch: non-physical dispersion drawn")
    return {"mass": mass, "moments": moments, "omega0": omega0, "Omega0": Omega0}


# ----------------------------------------------------------------------------------------- jaxsim
def member_runner(horizon: float, dt: float):
    """`run(mass, moments, omega0, Omega0)`: one dispersed member's final state (traceable)."""
    import equinox as eqx
    import jax.numpy as jnp

    import jaxsim as js
    from effectors.scenarios import combined

    sc, _, p = combined()

    def run(mass, moments, omega0, Omega0):
        model = eqx.tree_at(
            lambda s: (s.hub.mass, s.hub.IHubPntBc_B), sc, (mass, jnp.diag(moments))
        )
        y0 = model.init_state(p["r_CN_N"], p["v_CN_N"], p["sigma_BN"], omega0,
                              effector_states={"rw": {"Omega": Omega0}})  # fmt: skip
        sol = js.simulate(model, y0, horizon, dt=dt, outputs=False, throw=False)
        hub = sol.ys["hub"]
        return {
            "r_BN_N": hub["r_BN_N"][-1],
            "sigma_BN": hub["sigma_BN"][-1],
            "omega_BN_B": hub["omega_BN_B"][-1],
            "ok": sol.ok,
        }

    return run


def batched_runner(horizon: float, dt: float, chunk: int | None = None):
    """`jaxsim.jit(jax.vmap(run))` over `(mass, moments, omega0, Omega0)`; returns final states.

    With `chunk`, the members run `chunk` at a time inside the one compiled program
    (`jax.lax.map(..., batch_size=chunk)`: a loop over vmapped chunks, whose working set stays in
    the cache).
    """
    import jax

    import jaxsim as js

    run = member_runner(horizon, dt)
    if chunk is None:
        return js.jit(jax.vmap(run))
    return js.jit(lambda *a: jax.lax.map(lambda m: run(*m), a, batch_size=chunk))


def run_batch_runner(horizon: float, dt: float, chunk: int, workers: int | None = None):
    """The same members through `jaxsim.montecarlo.run_batch` (`chunk` members per compiled call,
    `workers` chunks at a time from a thread pool; default one per core on the CPU); returns
    `run_batch`'s final states (numpy)."""
    import jax.numpy as jnp

    from jaxsim import montecarlo as mc

    single = member_runner(horizon, dt)
    names = ("mass", "moments", "omega0", "Omega0")

    def member(p):  # one function for every call: run_batch keeps its compiled program
        return single(*(p[k] for k in names))

    def runner(*arrays):
        params = dict(zip(names, (jnp.asarray(a) for a in arrays), strict=True))
        return mc.run_batch(member, params, chunk_size=chunk, workers=workers).outputs

    return runner


# --------------------------------------------------------------------------------------- Basilisk
def _dispersed_spec(spec: dict, member: dict) -> dict:
    s = copy.deepcopy(spec)
    s["hub"]["mHub_kg"] = float(member["mass"])
    s["hub"]["IHubPntBc_B_kgm2"] = np.diag(member["moments"]).tolist()
    s["initial_conditions"]["omega_BN_B_radps"] = list(map(float, member["omega0"]))
    rw = next(e for e in s["effectors"] if e["type"] == "reactionWheelStateEffector")
    for w, om in zip(rw["wheels"], member["Omega0"]):
        w["Omega0_radps"] = float(om)
    return s


def bsk_member(task) -> dict:
    """Build and run one dispersed Basilisk member (top level: picklable for the process pool)."""
    member, horizon = task
    t0 = time.perf_counter()
    scen = bs.BasiliskScenario(_dispersed_spec(bs.load_spec("combined"), member),
                               duration=horizon, record=False)  # fmt: skip
    execute = scen.run()
    total = time.perf_counter() - t0
    fin = scen.final_state()
    return {
        "execute_s": execute,
        "total_s": total,
        "r_BN_N": fin["r_BN_N"],
        "sigma_BN": fin["sigma_BN"],
        "omega_BN_B": fin["omega_BN_B"],
    }


def _bsk_init():
    import Basilisk  # noqa: F401  (import once per worker, outside the timed map)


def _members(d: dict, idx) -> list[dict]:
    return [{k: v[i] for k, v in d.items()} for i in idx]


def bsk_serial(d: dict, n: int, horizon: float) -> list[dict]:
    """Members 0..n-1 in this process, after a warm-up member (imports, first-run set-up)."""
    bsk_member((_members(d, [0])[0], 1.0))
    return [bsk_member((m, horizon)) for m in _members(d, range(n))]


def bsk_two_process(d: dict, n: int, horizon: float) -> float:
    """Wall time [s] of a 2-process pool map over members 0..n-1 (after a warm-up map)."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")  # no fork of a process running JAX threads
    pool = ctx.Pool(2, initializer=_bsk_init)
    try:
        pool.map(bsk_member, [(m, 1.0) for m in _members(d, range(2))], chunksize=1)
        t0 = time.perf_counter()
        pool.map(bsk_member, [(m, horizon) for m in _members(d, range(n))], chunksize=1)
        return time.perf_counter() - t0
    finally:
        pool.close()
        pool.join()


# -------------------------------------------------------------------------------------------- run
def run(horizon=HORIZON, sizes=SIZES, n_serial=BSK_SERIAL, n_parallel=BSK_PARALLEL, seed=0):
    import jax.numpy as jnp

    from jaxsim.montecarlo.batch import usable_cores

    spec = bs.load_spec("combined")
    dt = float(spec["time"]["step_s"])
    n_steps = int(round(horizon / dt))
    d = dispersions(max(max(sizes), n_serial, n_parallel), seed)
    runners = {None: batched_runner(horizon, dt), CHUNK: batched_runner(horizon, dt, CHUNK),
               "run_batch": run_batch_runner(horizon, dt, RUN_BATCH_CHUNK)}  # fmt: skip
    have_bsk = bs.available()
    notes = []

    jax_rows, last = [], None
    for n in sorted(sizes):
        args = [jnp.asarray(d[k][:n]) for k in ("mass", "moments", "omega0", "Omega0")]
        for how in (None, CHUNK, "run_batch") if n > RUN_BATCH_CHUNK else (None,):
            chunk = RUN_BATCH_CHUNK if how == "run_batch" else how
            tj = cm.time_jax(runners[how], *args, repeats=3 if n <= 64 else 2)
            last = tj["result"]
            ok = bool(np.all(np.asarray(last["ok"])))
            label = (f"{chunk}, run_batch x{usable_cores()} workers" if how == "run_batch"
                     else chunk or n)  # fmt: skip
            jax_rows.append({
                "n_members": n, "chunk": label, "n_steps": n_steps,
                "jaxsim_compile_s": tj["compile_s"], "jaxsim_run_s": tj["run_s"],
                "jaxsim_us_per_member_step": tj["run_s"] / (n * n_steps) * 1e6, "all_successful": ok,
            })  # fmt: skip
            print(f"jaxsim N={n:5d} chunk {label}: run {tj['run_s']:.3f} s "
                  f"({jax_rows[-1]['jaxsim_us_per_member_step']:.3f} us/member-step), compile "
                  f"{tj['compile_s']:.1f} s, all ok {ok}", flush=True)  # fmt: skip
            del tj

    bsk = None
    agreement = None
    if have_bsk:
        n_serial = min(n_serial, max(sizes))  # compared with members of the largest batch
        ser = bsk_serial(d, n_serial, horizon)
        exec_per_member = float(np.mean([r["execute_s"] for r in ser]))
        total_per_member = float(np.mean([r["total_s"] for r in ser]))
        wall2 = bsk_two_process(d, n_parallel, horizon)
        bsk = {
            "version": bs.version(),
            "n_serial": n_serial,
            "n_parallel": n_parallel,
            "serial_execute_s_per_member": exec_per_member,
            "serial_total_s_per_member": total_per_member,
            "serial_build_s_per_member": total_per_member - exec_per_member,
            "serial_execute_us_per_member_step": exec_per_member / n_steps * 1e6,
            "serial_total_us_per_member_step": total_per_member / n_steps * 1e6,
            "two_process_wall_s": wall2,
            "two_process_s_per_member": wall2 / n_parallel,
            "two_process_us_per_member_step": wall2 / (n_parallel * n_steps) * 1e6,
        }
        print(f"Basilisk serial ({n_serial}): execute {bsk['serial_execute_us_per_member_step']:.2f} "
              f"us/member-step, with build {bsk['serial_total_us_per_member_step']:.2f}; 2 processes "
              f"({n_parallel}): {bsk['two_process_us_per_member_step']:.2f} us/member-step", flush=True)  # fmt: skip
        # Same dispersions in both codes: members 0..n_serial-1 of the largest batch vs Basilisk.
        agreement = {}
        for key in ("r_BN_N", "sigma_BN", "omega_BN_B"):
            a = np.asarray(last[key])[:n_serial]
            b = np.stack([r[key] for r in ser])
            if key == "r_BN_N":
                agreement["max_rel_r_BN_N"] = float(
                    np.max(np.linalg.norm(a - b, axis=1) / np.linalg.norm(b, axis=1))
                )
            else:
                agreement[f"max_abs_{key}"] = float(np.max(np.abs(a - b)))
        for row in jax_rows:
            n = row["n_members"]
            t_bsk2 = bsk["two_process_s_per_member"] * n
            t_ideal = exec_per_member * n / 2.0
            row["bsk_2proc_s_extrapolated"] = t_bsk2
            row["speedup_vs_bsk_2proc"] = t_bsk2 / row["jaxsim_run_s"]
            row["speedup_vs_bsk_ideal_2proc_execute"] = t_ideal / row["jaxsim_run_s"]
            row["bsk_extrapolated"] = n > n_parallel
    else:
        notes.append("Basilisk (bsk) not importable: Basilisk columns skipped")
    big = sorted((r for r in jax_rows if r["n_members"] == 1024), key=lambda r: r["jaxsim_run_s"])
    target = None
    if big and have_bsk:
        target = {
            "chunk": big[0]["chunk"],
            "speedup_1024_vs_bsk_2proc": big[0]["speedup_vs_bsk_2proc"],
            "speedup_1024_vs_bsk_ideal_2proc_execute": big[0]["speedup_vs_bsk_ideal_2proc_execute"],
            "target": TARGET_SPEEDUP,
            "met": big[0]["speedup_vs_bsk_2proc"] >= TARGET_SPEEDUP,
        }
    return {
        "name": NAME,
        "title": TITLE,
        "environment": cm.environment(),
        "horizon_s": horizon,
        "dt_s": dt,
        "n_steps": n_steps,
        "dispersion": {
            "seed": seed,
            "hub_mass_rel_sigma": SIG_MASS,
            "hub_moments_rel_sigma": SIG_MOMENTS,
            "omega0_sigma_radps": SIG_OMEGA,
            "rw_Omega0_sigma_radps": SIG_RW,
        },
        "rows": jax_rows,
        "basilisk": bsk,
        "agreement_vs_basilisk": agreement,
        "target": target,
        "note": "; ".join(notes) or None,
    }


def to_markdown(data: dict) -> str:
    env, b = data["environment"], data["basilisk"]
    rows = []
    for r in data["rows"]:
        rr = dict(r)
        if b:
            rr["bsk_2proc_us"] = b["two_process_us_per_member_step"]
            rr["bsk_serial_us"] = b["serial_execute_us_per_member_step"]
            rr["bsk_src"] = "extrapolated" if r["bsk_extrapolated"] else "measured"
        rows.append(rr)
    cols = [
        ("n_members", "members"),
        ("chunk", "vmapped chunk"),
        ("jaxsim_us_per_member_step", "jaxsim [us/member-step]"),
        ("jaxsim_run_s", "jaxsim run [s]"),
        ("jaxsim_compile_s", "jaxsim compile [s]"),
        ("bsk_serial_us", "BSK serial execute [us/member-step]"),
        ("bsk_2proc_us", "BSK 2-proc [us/member-step]"),
        ("bsk_2proc_s_extrapolated", "BSK 2-proc time [s]"),
        ("bsk_src", "BSK time"),
        ("speedup_vs_bsk_2proc", "speedup vs BSK 2-proc"),
        ("speedup_vs_bsk_ideal_2proc_execute", "speedup vs ideal 2-proc execute"),
    ]
    md = [f"## {data['title']}", ""]
    md.append(
        f"jax {env['jax']} ({env['jax_backend']}, {env['jax_devices'][0]}, x64={env['x64']}), "
        f"Basilisk {b['version'] if b else 'not installed'}, {env['cpu_count']} CPUs, 1-min load "
        f"{env.get('loadavg_1m', float('nan')):.1f} at {env['time']}. Horizon "
        f"**{data['horizon_s']:.0f} s = {data['n_steps']} RK4 steps** of {data['dt_s']} s per member "
        "(one orbit is 58,300 steps), final state only. Dispersion (1 sigma): hub mass "
        f"{100 * data['dispersion']['hub_mass_rel_sigma']:.0f} %, principal moments "
        f"{100 * data['dispersion']['hub_moments_rel_sigma']:.0f} %, body rates "
        f"{data['dispersion']['omega0_sigma_radps']} rad/s, wheel speeds "
        f"{data['dispersion']['rw_Omega0_sigma_radps']} rad/s."
    )
    if data["note"]:
        md += ["", f"**Note:** {data['note']}."]
    md += ["", cm.markdown_table(rows, cols), ""]
    if b:
        md.append(
            f"Basilisk: serial over {b['n_serial']} members, `ExecuteSimulation()` "
            f"{cm.fmt(b['serial_execute_s_per_member'])} s per member, build + initialize "
            f"{cm.fmt(b['serial_build_s_per_member'])} s more; 2-process `multiprocessing` pool "
            f"(spawn, each worker builds and runs its own simulations) over {b['n_parallel']} members: "
            f"{cm.fmt(b['two_process_wall_s'])} s wall ({cm.fmt(b['two_process_s_per_member'])} s per "
            "member). `BSK 2-proc time` = that per-member time x members, extrapolated linearly beyond "
            f"{b['n_parallel']} members. `speedup vs ideal 2-proc execute` = Basilisk serial execute "
            "time / 2 x members (no build, perfect scaling) over jaxsim's time: the conservative figure."
        )
        a = data["agreement_vs_basilisk"]
        md += [
            "",
            f"Same dispersions in both codes (members 0-{b['n_serial'] - 1}, final state after "
            f"{data['horizon_s']:.0f} s): "
            + ", ".join(f"{k} {cm.fmt(v)}" for k, v in a.items())
            + ".",
        ]
    t = data["target"]
    if t:
        md += [
            "",
            f"**Target (1024 runs >= {t['target']:.0f}x faster than Basilisk's two-process Monte "
            f"Carlo):** {'met' if t['met'] else 'NOT met'}: {cm.fmt(t['speedup_1024_vs_bsk_2proc'])}x "
            f"(conservative: {cm.fmt(t['speedup_1024_vs_bsk_ideal_2proc_execute'])}x), best row "
            f"(vmapped chunk {t.get('chunk', 1024)}), on {env['jax_backend']}.",
        ]
    return "\n".join(md)


def main(argv=None) -> int:
    options = [
        ("--horizon", dict(type=float, default=HORIZON, help="propagated time per member [s]")),
        ("--sizes", dict(type=int, nargs="+", default=list(SIZES), help="batch sizes")),
        ("--bsk-serial", dict(type=int, default=BSK_SERIAL, help="Basilisk serial members")),
        ("--bsk-parallel", dict(type=int, default=BSK_PARALLEL, help="2-process members")),
        ("--seed", dict(type=int, default=0)),
    ]

    def run_args(a):
        horizon = 20.0 if a.quick else a.horizon
        return run(horizon, tuple(a.sizes), a.bsk_serial, a.bsk_parallel, a.seed)

    quick = "horizon 20 s (overrides --horizon)"
    return cm.main(NAME, TITLE, run_args, to_markdown, argv, quick=quick, options=options)


if __name__ == "__main__":
    raise SystemExit(main())

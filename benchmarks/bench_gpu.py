"""Benchmark for an accelerator (issue #18): batches of dispersed `combined` runs on the default device.

Model: the `combined` spacecraft (`effectors.scenarios.combined`, spec `tests/data/combined.json`),
classical RK4 at 0.1 s for 600 s (6,000 steps), float64, states sampled every 10 s (61 samples, the
last one the final state), no derived outputs. Member `i` disperses the hub mass, its three
principal moments, the initial body rates and the initial wheel speeds with the seeded numpy draws
of `benchmarks/bench_batch.py` (the same members on every machine and for every batch size).

Measured on `jax.default_backend()` (a GPU when the CUDA plugin is installed, see the README):

- `vmap` rows: member-steps per second for each batch size (default 1, 1e3, 1e4, 1e5 members on an
  accelerator; 1 and 1e3 on the CPU). The members run `chunk_size` at a time through one compiled
  `jaxsim.jit(jax.vmap(member))` program (the last chunk padded with copies of the last member,
  which are not counted); all chunks are dispatched before one `block_until_ready`. Compile time is
  `lower().compile()`; run time the fastest of the repeated runs.
- `single` row: one unbatched member per call, per-step time.
- `grad vmap` row: reverse-mode gradient of a final-state scalar (sum of the final sigma_BN and
  omega_BN_B) w.r.t. every dispersed parameter (10 per member), vmapped over the members.

Checks, written to the JSON: every member's states are finite (the only way a fixed-step run
fails); the final states of a few fixed
members in every batch equal the same members run unbatched to `REL_TOL` (relative, per state
leaf); the final states of the fixed members are stored (`fixed_members`) so that a run on another
device can be compared with this file: `--compare benchmarks/results/gpu.json` (the committed CPU
run) reports the largest relative difference and fails above `REL_TOL`.

Run: `python -m benchmarks.bench_gpu [--sizes 1 1000] [--chunk N] [--grad-members N] [--quick]
[--compare PATH] [--out DIR]` (writes `<out>/gpu.json` and `gpu.md`, default `benchmarks/results/`).
Exit status 1 when a check fails (the results are written first). After every measured row the rows
so far are written to `<out>/gpu.json` (with `"partial": true`), so a run cut short by a time limit
still leaves its figures.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np


sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # also runnable as a script

from benchmarks import _common as cm  # noqa: E402
from benchmarks.bench_batch import dispersions  # noqa: E402  (same members as the batch benchmark)


NAME = "gpu"
TITLE = "Batched `combined` runs (RK4 0.1 s, float64) on the default device: throughput, compile, gradient"
HORIZON, DT, SAMPLE_DT = 600.0, 0.1, 10.0  # [s]
SIZES_ACCEL = (1, 1_000, 10_000, 100_000)
SIZES_CPU = (1, 1_000)  # the CPU default stays within a few minutes on 2 cores
CHUNK_ACCEL = 100_000  # members per compiled call: 1e5 members x 61 samples x 20 states is ~1 GB
CHUNK_CPU = 100  # small chunks keep the CPU working set in cache (see `batch.md`)
GRAD_MEMBERS_ACCEL, GRAD_MEMBERS_CPU = 1_000, 16
FIXED = (0, 1, 2, 3)  # members whose final states are checked and stored
# Relative tolerance of the batched-vs-unbatched and cross-device checks (issue #18): the same
# float64 arithmetic in another order (vectorized, fused differently) after 6,000 steps.
REL_TOL = 1e-12
QUICK = {"sizes": (2, 5), "horizon": 20.0, "chunk": 2, "grad_members": 2}
PARAMS = ("mass", "moments", "omega0", "Omega0")


def _functions(horizon: float):
    """`member(mass, moments, omega0, Omega0) -> (sampled states, ok)` and the scalar of the
    gradient rows, for one member (vmap them)."""
    import equinox as eqx
    import jax
    import jax.numpy as jnp

    import jaxsim as js
    from effectors.scenarios import combined

    sc, _, p = combined()

    def model_y0(mass, moments, omega0, Omega0):
        model = eqx.tree_at(
            lambda s: (s.hub.mass, s.hub.IHubPntBc_B), sc, (mass, jnp.diag(moments))
        )
        y0 = model.init_state(p["r_CN_N"], p["v_CN_N"], p["sigma_BN"], omega0,
                              effector_states={"rw": {"Omega": Omega0}})  # fmt: skip
        return model, y0

    def member(mass, moments, omega0, Omega0):
        model, y0 = model_y0(mass, moments, omega0, Omega0)
        sol = js.simulate(
            model, y0, horizon, dt=DT, sample_dt=SAMPLE_DT, outputs=False, throw=False
        )
        # A fixed-step run fails only by a non-finite state (`Solution.result`): check that.
        finite = [jnp.all(jnp.isfinite(x)) for x in jax.tree_util.tree_leaves(sol.ys)]
        return sol.ys, jnp.all(jnp.stack(finite))

    def scalar(mass, moments, omega0, Omega0):
        model, y0 = model_y0(mass, moments, omega0, Omega0)
        hub = js.simulate(model, y0, horizon, dt=DT, outputs=False, throw=False).ys["hub"]
        return jnp.sum(hub["sigma_BN"][-1]) + jnp.sum(hub["omega_BN_B"][-1])

    return member, scalar


def _flat(tree, prefix="") -> dict:
    """`{"hub/r_BN_N": leaf, ...}` of a nested dict of arrays."""
    out = {}
    for k in sorted(tree):
        v = tree[k]
        out.update(_flat(v, f"{prefix}{k}/") if isinstance(v, dict) else {f"{prefix}{k}": v})
    return out


def _diff(a: dict, b: dict, scale: dict) -> tuple[float, str]:
    """Largest relative difference of two final states (dicts of leaves), per leaf `max|a - b|` over
    `scale[leaf]` (the leaf's largest magnitude over the run: a component that happens to be near
    zero at the end, such as a decayed panel rate, is not divided by ~0), and the leaf where it is."""
    worst = (0.0, "")
    for k in sorted(b):
        x, y = np.asarray(a[k], dtype=np.float64), np.asarray(b[k], dtype=np.float64)
        worst = max(worst, (float(np.max(np.abs(x - y))) / scale[k], k))
    return worst


def _reference(single, args: list, fixed: list) -> dict:
    """Unbatched runs of the fixed members: final state, per-leaf scale (largest magnitude over the
    samples) and round-off sensitivity (largest change of the final leaf, over its scale, when all
    10 parameters move by one ulp up, or down)."""
    import jax
    import jax.numpy as jnp

    out = {}
    for i in fixed:
        p = [np.asarray(a[i], dtype=np.float64) for a in args]
        variants = [p, [np.nextafter(x, np.inf) for x in p], [np.nextafter(x, -np.inf) for x in p]]
        runs = jax.block_until_ready([single(*(jnp.asarray(x) for x in q)) for q in variants])
        if not all(bool(ok) for _, ok in runs):
            raise RuntimeError(f"bench_gpu: an unbatched run of member {i} failed")
        flat = _flat(runs[0][0])
        scale = {k: float(np.max(np.abs(np.asarray(v)))) or 1.0 for k, v in flat.items()}
        final = {k: np.asarray(v[-1]) for k, v in flat.items()}
        sens = {k: 0.0 for k in flat}
        for ys, _ in runs[1:]:
            for k, v in _flat(ys).items():
                change = float(np.max(np.abs(np.asarray(v[-1]) - final[k]))) / scale[k]
                sens[k] = max(sens[k], change)
        out[i] = {"final": final, "scale": scale, "sensitivity": sens}
    return out


def _chunks(args: list, n: int, chunk: int) -> list:
    """The member arrays cut into `ceil(n / chunk)` device chunks of `chunk` members (the last one
    padded with copies of member n-1)."""
    import jax
    import jax.numpy as jnp

    n_pad = -(-n // chunk) * chunk
    idx = np.minimum(np.arange(n_pad), n - 1)
    out = []
    for s in range(0, n_pad, chunk):
        out.append([jax.device_put(jnp.asarray(a[idx[s : s + chunk]])) for a in args])
    return jax.block_until_ready(out)


def _timed_runs(fn, calls: list, budget_s: float = 20.0, max_repeats: int = 3):
    """Run `fn` on every argument list of `calls` (all dispatched, then one block), repeatedly while
    the runs so far took less than `budget_s`; returns (fastest time [s], runs, last outputs)."""
    import jax

    times, outs = [], None
    while len(times) < max_repeats and (not times or sum(times) < budget_s):
        t0 = time.perf_counter()
        outs = jax.block_until_ready([fn(*c) for c in calls])
        times.append(time.perf_counter() - t0)
    return min(times), len(times), outs


def _compile(jitted, example) -> tuple:
    t0 = time.perf_counter()
    compiled = jitted.lower(*example).compile()
    return compiled, time.perf_counter() - t0


def _grad_row(rows: list, scalar, args: list, n: int, n_steps: int, dtype: str) -> None:
    """Append the row of the vmapped reverse-mode gradient of `scalar` over members 0..n-1."""
    import jax

    import jaxsim as js

    grad = js.jit(jax.vmap(jax.grad(scalar, argnums=(0, 1, 2, 3))))
    grad_members = n
    gcalls = _chunks(args, grad_members, grad_members)
    grad_c, grad_compile = _compile(grad, gcalls[0])
    run_s, repeats, gouts = _timed_runs(grad_c, gcalls)
    finite = bool(all(np.all(np.isfinite(np.asarray(g))) for g in jax.tree_util.tree_leaves(gouts)))
    rows.append({"mode": "grad vmap", "members": grad_members, "chunk_size": grad_members,
                 "n_chunks": 1, "n_steps": n_steps, "dtype": dtype, "compile_s": grad_compile,
                 "run_s": run_s, "repeats": repeats,
                 "member_steps_per_s": grad_members * n_steps / run_s,
                 "us_per_member_step": run_s / (grad_members * n_steps) * 1e6,
                 "all_successful": finite, "n_parameters_per_member": 10})  # fmt: skip
    print(f"grad vmap N={grad_members}: {rows[-1]['member_steps_per_s']:.3e} member-steps/s, "
          f"run {run_s:.3f} s, compile {grad_compile:.1f} s, finite {finite}", flush=True)  # fmt: skip


def run(
    sizes, horizon=HORIZON, chunk=None, grad_members=None, seed=0, grad=True, on_row=None
) -> dict:
    """The benchmark's result dict; `on_row(rows)` (optional) is called after every measured row."""
    import jax

    import jaxsim as js

    backend = jax.default_backend()
    accel = backend != "cpu"
    chunk = chunk or (CHUNK_ACCEL if accel else CHUNK_CPU)
    grad_members = grad_members or (GRAD_MEMBERS_ACCEL if accel else GRAD_MEMBERS_CPU)
    n_steps = int(round(horizon / DT))
    n_max = max(max(sizes), grad_members, len(FIXED))
    d = dispersions(n_max, seed)
    args = [d[k] for k in PARAMS]
    member, scalar = _functions(horizon)
    batched = js.jit(jax.vmap(member))
    rows, compiled_by_shape = [], {}

    # Single (unbatched) member: per-step time, and the reference of the batched-vs-single check.
    single = js.jit(member)
    one = _chunks(args, 1, 1)[0]
    one = [a[0] for a in one]
    single_c, single_compile = _compile(single, one)
    dtype = str(jax.eval_shape(single, *one)[0]["hub"]["r_BN_N"].dtype)
    run_s, repeats, _ = _timed_runs(single_c, [one], max_repeats=5)
    rows.append({"mode": "single", "members": 1, "chunk_size": None, "n_steps": n_steps,
                 "dtype": dtype,
                 "compile_s": single_compile, "run_s": run_s, "repeats": repeats,
                 "member_steps_per_s": n_steps / run_s, "us_per_step": run_s / n_steps * 1e6})  # fmt: skip
    print(
        f"single: {rows[-1]['us_per_step']:.2f} us/step (compile {single_compile:.1f} s)",
        flush=True,
    )
    on_row = on_row or (lambda rows: None)
    on_row(rows)
    fixed = [i for i in FIXED if i < n_max]
    reference = _reference(single_c, args, fixed)

    last_final = {}
    for n in sorted(sizes):
        c = min(chunk, n)
        calls = _chunks(args, n, c)
        if c not in compiled_by_shape:
            compiled_by_shape[c] = _compile(batched, calls[0])
            compile_s = compiled_by_shape[c][1]
        else:
            compile_s = 0.0  # reused program of the same chunk shape
        run_s, repeats, outs = _timed_runs(compiled_by_shape[c][0], calls)
        ok = bool(all(np.all(np.asarray(o[1])) for o in outs))
        final = {}
        for i in (i for i in fixed if i < n):
            ys = outs[i // c][0]
            final[i] = {k: np.asarray(v[i % c, -1]) for k, v in _flat(ys).items()}
        worst, leaf = max(
            (_diff(final[i], r["final"], r["scale"]) for i, r in reference.items() if i in final),
            default=(0.0, ""),
        )
        last_final = final
        rows.append({
            "mode": "vmap", "members": n, "chunk_size": c, "n_chunks": len(calls),
            "n_steps": n_steps, "dtype": dtype, "compile_s": compile_s, "run_s": run_s,
            "repeats": repeats, "member_steps_per_s": n * n_steps / run_s,
            "us_per_member_step": run_s / (n * n_steps) * 1e6, "all_successful": ok,
            "checked_members": sorted(final),
            "batched_vs_single_max_rel": worst, "batched_vs_single_worst_leaf": leaf,
        })  # fmt: skip
        print(f"vmap N={n}: {rows[-1]['member_steps_per_s']:.3e} member-steps/s, run {run_s:.3f} s, "
              f"compile {compile_s:.1f} s, chunk {c} x {len(calls)}, ok {ok}, "
              f"batched vs single {worst:.1e} ({leaf})", flush=True)  # fmt: skip
        on_row(rows)
        del outs, calls

    # Reverse-mode gradient batch w.r.t. the dispersed parameters.
    if grad:
        _grad_row(rows, scalar, args, grad_members, n_steps, dtype)
        on_row(rows)
    else:
        print("grad vmap: skipped (--no-grad)", flush=True)

    batch_rows = [r for r in rows if r["mode"] == "vmap"]
    checks = {
        "rel_tol": REL_TOL,
        "all_successful": all(r["all_successful"] for r in rows if "all_successful" in r),
        "batched_vs_single_max_rel": max(r["batched_vs_single_max_rel"] for r in batch_rows),
        "roundoff_sensitivity_max": max(
            v for r in reference.values() for v in r["sensitivity"].values()
        ),
    }
    checks["batched_equals_single"] = checks["batched_vs_single_max_rel"] <= REL_TOL
    dev = jax.devices()[0]
    return {
        "name": NAME,
        "title": TITLE,
        "environment": cm.environment(),
        "device_kind": dev.device_kind,
        "platform": dev.platform,
        "device_count": jax.device_count(),
        "horizon_s": horizon,
        "dt_s": DT,
        "sample_dt_s": SAMPLE_DT,
        "n_steps": n_steps,
        "dtype": dtype,
        "seed": seed,
        "rows": rows,
        "checks": checks,
        "fixed_members": {
            "horizon_s": horizon,
            "members": {
                str(i): {
                    "params": {k: np.asarray(d[k][i]).tolist() for k in PARAMS},
                    "final_state": {k: v.tolist() for k, v in last_final[i].items()},
                    "scale": reference[i]["scale"],
                    "roundoff_sensitivity": reference[i]["sensitivity"],
                }
                for i in sorted(last_final)
            },
        },
    }


def compare(data: dict, other: dict) -> dict:
    """Final states of the fixed members of `data` vs those of `other` (another run's JSON)."""
    a, b = data["fixed_members"], other["fixed_members"]
    if a["horizon_s"] != b["horizon_s"]:
        raise ValueError(
            f"bench_gpu --compare: horizons differ ({a['horizon_s']} s here, {b['horizon_s']} s "
            "in the compared file); run both with the same options"
        )
    common = sorted(set(a["members"]) & set(b["members"]), key=int)
    if not common:
        raise ValueError("bench_gpu --compare: the two runs have no fixed member in common")
    diffs, params_equal = [], True
    for i in common:
        ma, mb = a["members"][i], b["members"][i]
        params_equal &= all(np.array_equal(ma["params"][k], mb["params"][k]) for k in PARAMS)
        diffs.append(_diff(ma["final_state"], mb["final_state"], mb["scale"]))
    worst, leaf = max(diffs)
    env = other.get("environment", {})
    return {
        "against": f"{other.get('device_kind', '?')} ({env.get('jax_backend', '?')}, "
        f"measured {env.get('time', '?')})",
        "members": [int(i) for i in common],
        "params_equal": params_equal,
        "max_rel": worst,
        "worst_leaf": leaf,
        "rel_tol": REL_TOL,
        "equal": params_equal and worst <= REL_TOL,
    }


def to_markdown(data: dict) -> str:
    env, ch = data["environment"], data["checks"]
    cols = [
        ("mode", "mode"),
        ("members", "members"),
        ("chunk_size", "chunk"),
        ("n_chunks", "chunks"),
        ("member_steps_per_s", "member-steps/s"),
        ("us_per_member_step", "us/member-step"),
        ("us_per_step", "us/step (single)"),
        ("run_s", "run [s]"),
        ("compile_s", "compile [s]"),
        ("batched_vs_single_max_rel", "batched vs single (rel)"),
    ]
    md = [f"## {data['title']}", ""]
    md.append(
        f"Device **{data['device_kind']}** ({data['platform']}, {data['device_count']} device(s)), "
        f"jax {env['jax']}, x64={env['x64']}, dtype {data['dtype']}, {env['cpu_count']} CPUs, 1-min "
        f"load {env.get('loadavg_1m', float('nan')):.1f} at {env['time']}. Horizon "
        f"{data['horizon_s']:.0f} s = {data['n_steps']} RK4 steps of {data['dt_s']} s, states "
        f"sampled every {data['sample_dt_s']:.0f} s; dispersions of `bench_batch` (seed "
        f"{data['seed']}). Run time: fastest of the repeated runs (all chunks dispatched, one "
        "block); compile: `lower().compile()` (0: the program of that chunk shape was reused). "
        "`grad vmap`: reverse-mode gradient of the final sigma_BN + omega_BN_B sum w.r.t. the 10 "
        "dispersed parameters of every member."
    )
    md += ["", cm.markdown_table(data["rows"], cols), ""]
    md.append(
        f"Checks: all states and gradients finite: **{ch['all_successful']}**; "
        f"final states of members {[int(i) for i in data['fixed_members']['members']]} in every "
        "batch equal "
        f"the same members run unbatched to {cm.fmt(ch['batched_vs_single_max_rel'])} relative "
        f"(per state leaf, over the leaf's largest magnitude in the run; tolerance "
        f"{cm.fmt(ch['rel_tol'])}): **{ch['batched_equals_single']}**. For scale: moving all 10 "
        "parameters of a member by one ulp changes its final state by up to "
        f"{cm.fmt(ch['roundoff_sensitivity_max'])} relative (same measure)."
    )
    c = data.get("compare")
    if c:
        md += [
            "",
            f"Compared with {c['against']}: final states of members {c['members']} differ by "
            f"{cm.fmt(c['max_rel'])} relative ({c['worst_leaf']}; tolerance "
            f"{cm.fmt(c['rel_tol'])}), same parameters "
            f"{c['params_equal']}: **{'equal' if c['equal'] else 'NOT equal'}**.",
        ]
    return "\n".join(md)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=TITLE)
    p.add_argument("--sizes", type=int, nargs="+", help="batch sizes (default: by backend)")
    p.add_argument("--horizon", type=float, default=HORIZON, help="propagated time [s]")
    p.add_argument("--chunk", type=int, help="members per compiled call (default: by backend)")
    p.add_argument("--grad-members", type=int, help="members of the gradient batch")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-grad", action="store_true", help="skip the gradient row")
    p.add_argument("--quick", action="store_true", help=f"tiny run for CI: {QUICK}")
    p.add_argument("--compare", type=Path, help="a gpu.json to compare the final states with")
    p.add_argument("--out", type=Path, default=cm.RESULTS, help="output directory")
    a = p.parse_args(argv)
    import jax

    if a.quick:
        a.sizes, a.horizon = list(QUICK["sizes"]), QUICK["horizon"]
        a.chunk, a.grad_members = QUICK["chunk"], QUICK["grad_members"]
    if a.horizon / SAMPLE_DT != round(a.horizon / SAMPLE_DT):
        p.error(f"--horizon must be a multiple of {SAMPLE_DT} s, got {a.horizon} s")
    for name in ("sizes", "chunk", "grad_members"):
        v = getattr(a, name)
        if v is not None and min(np.atleast_1d(v)) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1, got {v}")
    if a.sizes is None:
        a.sizes = list(SIZES_ACCEL if jax.default_backend() != "cpu" else SIZES_CPU)
    other = json.loads(a.compare.read_text()) if a.compare else None  # before --out overwrites it
    if other is not None and other["fixed_members"]["horizon_s"] != a.horizon:
        p.error(
            f"--compare {a.compare}: its horizon is {other['fixed_members']['horizon_s']} s, this "
            f"run's {a.horizon} s; compare runs made with the same options"
        )
    a.out.mkdir(parents=True, exist_ok=True)
    pj, pm = a.out / f"{NAME}.json", a.out / f"{NAME}.md"

    env = cm.environment()

    def partial(rows):  # rows so far, in case the run is cut short (a device time limit)
        part = {"name": NAME, "title": TITLE, "partial": True, "environment": env,
                "device_kind": jax.devices()[0].device_kind, "horizon_s": a.horizon, "rows": rows}  # fmt: skip
        pj.write_text(json.dumps(part, indent=1, default=cm._json_default) + "\n")

    t0 = time.perf_counter()
    data = run(tuple(a.sizes), a.horizon, a.chunk, a.grad_members, a.seed, not a.no_grad, partial)
    status = (
        0 if data["checks"]["all_successful"] and data["checks"]["batched_equals_single"] else 1
    )
    if other is not None:
        data["compare"] = compare(data, other)
        c = data["compare"]
        print(f"compare with {c['against']}: max rel {c['max_rel']:.2e} over members "
              f"{c['members']}, params equal {c['params_equal']}: {'ok' if c['equal'] else 'FAIL'}")  # fmt: skip
        status |= 0 if c["equal"] else 1
    data["wall_s"] = time.perf_counter() - t0
    pj.write_text(json.dumps(data, indent=1, default=cm._json_default) + "\n")
    pm.write_text(to_markdown(data).rstrip() + "\n")
    print(
        f"wrote {pj} and {pm} ({data['wall_s']:.0f} s); checks {'ok' if status == 0 else 'FAILED'}"
    )
    return status


if __name__ == "__main__":
    raise SystemExit(main())

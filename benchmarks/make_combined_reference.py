"""Generate `tests/data/combined_bsk.npz`: the `combined` benchmark model run in real Basilisk.

The spec `tests/data/combined.json` ("spec only" in the shared references) describes the benchmark model:
hub with CoM offset + 3 balanced reaction wheels (constant motor torques) + 2 damped hinged panels +
Earth point mass + gravity gradient + constant external torque, one orbit at 0.1 s, samples every 10 s.
This script rebuilds it in Basilisk (`tests/reference/basilisk_scenarios.py`), checks the run against the
numbers the spec records from the original Basilisk run (`basilisk_checks`: initial values, maximum and
final changes of the energies and momenta, MRP switches, max |sigma|), and writes the sampled outputs
under the spec's `npz_keys` as float64 arrays (compressed npz).

Usage (needs `pip install 'jaxsim-spacecraft[crossval]'`, i.e. bsk 2.12.1):

    python benchmarks/make_combined_reference.py [--out tests/data/combined_bsk.npz]

Provenance is documented in `tests/data/README.md`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np


sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.reference import basilisk_scenarios as bs  # noqa: E402


REQUIRED_BSK = "2.12.1"
# The spec's `basilisk_checks` were computed from the original run's float64 samples; an identical
# rebuild reproduces them to the last bits. 1e-9 relative leaves room only for summation-order noise.
CHECK_RTOL = 1e-9


def _check(out: dict, spec: dict) -> list[str]:
    """Compare a run with the spec's recorded `basilisk_checks`; returns a list of failures."""
    fails = []
    checks = spec["basilisk_checks"]

    def close(name, a, b):
        a, b = np.asarray(a, float), np.asarray(b, float)
        if not np.allclose(a, b, rtol=CHECK_RTOL, atol=0.0):
            fails.append(f"{name}: got {a}, spec {b}")

    for k in ("totOrbEnergy", "totRotEnergy", "totOrbAngMomPntN_N", "totRotAngMomPntC_N"):
        x = out[k]
        dx = x - x[0]
        dev = np.abs(dx) if x.ndim == 1 else np.linalg.norm(dx, axis=1)
        close(f"{k}.initial_value", x[0], checks[k]["initial_value"])
        close(f"{k}.max_abs_change", dev.max(), checks[k]["max_abs_change"])
        close(f"{k}.final_minus_initial_norm", dev[-1], checks[k]["final_minus_initial_norm"])
    close("max_sigma_norm", np.linalg.norm(out["sigma_BN"], axis=1).max(), checks["max_sigma_norm"])
    if int(out["MRPSwitchCount"][-1]) != int(checks["final_MRPSwitchCount"]):
        fails.append(
            f"final_MRPSwitchCount: got {out['MRPSwitchCount'][-1]}, "
            f"spec {checks['final_MRPSwitchCount']}"
        )
    for k, shape in spec["npz_keys"].items():
        if k not in out or list(out[k].shape) != list(shape):
            fails.append(f"{k}: shape {None if k not in out else out[k].shape}, spec {shape}")
    return fails


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=bs.DATA / "combined_bsk.npz")
    p.add_argument("--force", action="store_true", help="write even if the checks fail")
    a = p.parse_args(argv)
    if not bs.available():
        msg = "Basilisk (bsk) is not installed: pip install 'jaxsim-spacecraft[crossval]'"
        print(msg, file=sys.stderr)
        return 2
    if bs.version() != REQUIRED_BSK:
        print(f"warning: bsk {bs.version()} installed; the reference is for {REQUIRED_BSK}")
    spec = bs.load_spec("combined")
    out, wall = bs.run_spec(spec)
    fails = _check(out, spec)
    print(
        f"combined: {spec['time']['n_steps']} steps, ExecuteSimulation {wall:.2f} s "
        f"(recorders + energy logger), final MRPSwitchCount {int(out['MRPSwitchCount'][-1])}"
    )
    if fails:
        print("checks against the spec's basilisk_checks FAILED:\n  " + "\n  ".join(fails))
        if not a.force:
            return 1
    else:
        print(f"all basilisk_checks of the spec reproduced (rtol {CHECK_RTOL:g})")
    arrays = {k: np.ascontiguousarray(out[k], dtype=np.float64) for k in spec["npz_keys"]}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(a.out, **arrays)
    print(f"wrote {a.out} ({a.out.stat().st_size / 1024:.0f} KiB, {len(arrays)} arrays)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

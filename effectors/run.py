"""Run a saved setup with one command and write its results in the one schema of runs:

```bash
python -m effectors.run setup.json                  # writes setup.zarr (Zarr 3; needs zarr)
python -m effectors.run setup.toml -o results.nc    # netCDF (needs scipy or netCDF4)
python -m effectors.run setup.json --overwrite      # replace an existing setup.zarr
```

An existing output is never replaced without `--overwrite` (the command stops before running,
exit status 2). The results are written under a temporary name next to the output and moved into
place when complete: a run or a write that fails leaves an earlier output as it was.

The setup file is read and validated by `effectors.load_setup`; the run is
`jaxsim.simulate(model, y0, **settings)`; the results are `jaxsim.results.to_xarray(sol)` with the
setup's epoch (variables `r_CN_N`, `rw.Omega`, `ys.hub.sigma_BN`, ...; see `jaxsim.results`).
"""

import argparse
import sys
from pathlib import Path

from jaxsim.results import refuse_existing, replace_safely

from ._tools._setup_files import default_output, load_setup


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m effectors.run",
        description="Run a saved setup (effectors.save_setup) and write its results.",
    )
    parser.add_argument("setup", help="the setup file (.json or .toml)")
    parser.add_argument(
        "-o", "--output", help="results file: .zarr (default: next to the setup) or .nc"
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an existing output (default: refuse, write nothing)",
    )
    ns = parser.parse_args(argv)
    where = "python -m effectors.run"
    out = Path(ns.output) if ns.output else default_output(ns.setup)
    try:
        refuse_existing(out, ns.overwrite, where, "--overwrite")
        setup = load_setup(ns.setup)
    except (ValueError, FileExistsError) as err:
        print(err, file=sys.stderr)
        return 2
    try:
        sol = setup.run()
        ds = setup.to_xarray(sol)
        with replace_safely(out, overwrite=ns.overwrite, where=where, flag="--overwrite") as tmp:
            if out.suffix == ".nc":
                ds.to_netcdf(tmp)
            else:
                from jaxsim.results import to_zarr

                to_zarr(ds, tmp)
    except (ValueError, TypeError, OSError, ImportError) as err:
        kept = " (the earlier output is as it was)" if out.exists() else ""
        print(f"{where}: {ns.setup}: failed, nothing written{kept}: {err}", file=sys.stderr)
        return 1
    print(
        f"{ns.setup}: {type(setup.model).__name__} from t = {float(sol.ts[0])} to "
        f"{float(sol.t_final)} s ({len(sol.ts)} samples, result: {sol.message or 'successful'}) "
        f"-> {out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

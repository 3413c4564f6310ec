"""Run a saved setup with one command and write its results in the one schema of runs:

```bash
python -m effectors.run setup.json                  # writes setup.zarr (Zarr 3; needs zarr)
python -m effectors.run setup.toml -o results.nc    # netCDF (needs scipy or netCDF4)
```

The setup file is read and validated by `effectors.load_setup`; the run is
`jaxsim.simulate(model, y0, **settings)`; the results are `jaxsim.results.to_xarray(sol)` with the
setup's epoch (variables `r_CN_N`, `rw.Omega`, `ys.hub.sigma_BN`, ...; see `jaxsim.results`).
"""

import argparse
import sys
from pathlib import Path

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
    ns = parser.parse_args(argv)
    try:
        setup = load_setup(ns.setup)
    except ValueError as err:
        print(err, file=sys.stderr)
        return 2
    sol = setup.run()
    ds = setup.to_xarray(sol)
    out = Path(ns.output) if ns.output else default_output(ns.setup)
    if out.suffix == ".nc":
        ds.to_netcdf(out)
    else:
        from jaxsim.results import to_zarr

        to_zarr(ds, out)
    print(
        f"{ns.setup}: {type(setup.model).__name__} from t = {float(sol.ts[0])} to "
        f"{float(sol.t_final)} s ({len(sol.ts)} samples, result: {sol.message or 'successful'}) "
        f"-> {out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

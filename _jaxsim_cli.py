"""Command-line entry points of the `jaxsim-spacecraft` distribution (`jaxsim-demo`).

This module sits outside the `jaxsim` and `effectors` packages on purpose: both import JAX when
they are imported (float64 is switched on at import), which takes a second or two. Parsing the
arguments here first lets `jaxsim-demo --help` (and a wrong option) answer at once; the run itself
is `effectors.demo.run`, imported only after the arguments are parsed.
"""

import argparse


DEMO_DESCRIPTION = """\
Propagate the `combined` benchmark spacecraft (hub + 3 reaction wheels + 2 damped hinged panels +
point-mass gravity + gravity gradient + external torque) with RK4 and print the final state, the
drift of Basilisk's energy and momentum totals, and the compile and run times. With matplotlib
installed (the `plot` extra: pip install 'jaxsim-spacecraft[plot]') it also writes a figure;
without it the figure is skipped with a note and the demo still exits 0."""


def demo_parser() -> argparse.ArgumentParser:
    """The arguments of `jaxsim-demo` and `python -m effectors.demo` (one definition for both)."""
    parser = argparse.ArgumentParser(prog="jaxsim-demo", description=DEMO_DESCRIPTION)
    parser.add_argument("--out", default="jaxsim_demo.png", help="PNG file to write")
    parser.add_argument(
        "--overwrite", action="store_true", help="replace an existing --out file (default: refuse)"
    )
    parser.add_argument("--orbits", type=float, default=1.0, help="number of orbits (5830 s each)")
    parser.add_argument("--hub-only", action="store_true", help="leave out wheels and panels")
    parser.add_argument("--no-plot", action="store_true", help="print the run, write no figure")
    return parser


def demo(argv: list[str] | None = None) -> int:
    """`jaxsim-demo`: parse the arguments (exits on `--help` before JAX is imported), then run
    `effectors.demo.run`. Returns the exit status (0)."""
    args = demo_parser().parse_args(argv)
    from effectors.demo import run  # imports JAX, jaxsim and effectors

    return run(args)


if __name__ == "__main__":
    raise SystemExit(demo())

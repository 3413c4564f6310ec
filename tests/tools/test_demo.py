"""The demo's figure (`effectors.demo.demo_figure`): every panel has a legend and units, the orbit is
drawn in 3D with the Earth, a conservation-drift panel, no offset tick labels."""

import numpy as np
import pytest

import jaxsim as js
from effectors.demo import DRIFT_KEYS, demo_figure
from effectors.scenarios import combined


matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt


@pytest.fixture(scope="module")
def sol():
    sc, y0, p = combined()
    return js.simulate(sc, y0, 60.0, dt=p["step_s"], sample_dt=p["sample_interval_s"])


def _legend(ax):
    return [t.get_text() for t in ax.get_legend().get_texts()]


def test_demo_figure_panels(sol):
    fig = demo_figure(sol)
    try:
        fig.canvas.draw()
        orbit, sigma, omega, wheels, radius, drift = fig.get_axes()
        assert orbit.name == "3d" and len(orbit.collections) == 1  # the Earth
        assert _legend(orbit) == ["Earth", "r_CN_N", "t0"]
        assert orbit.get_xlabel() == "x_N [km]" and orbit.get_zlabel() == "z_N [km]"
        assert _legend(sigma) == _legend(omega) == ["x", "y", "z"]
        assert sigma.get_ylabel() == "sigma_BN [-]" and omega.get_ylabel() == "omega_BN_B [mrad/s]"
        np.testing.assert_allclose(omega.lines[1].get_ydata(),
                                   np.asarray(sol.outputs["omega_BN_B"])[:, 1] * 1e3, rtol=1e-15)  # fmt: skip
        assert _legend(wheels) == ["wheel 1", "wheel 2", "wheel 3"]
        assert wheels.get_ylabel() == "Omega [rad/s]"
        assert radius.get_ylabel() == "radius change [km]"
        # The drift panel: Basilisk's four totals, log scale, relative drift from t0.
        assert _legend(drift) == list(DRIFT_KEYS) and drift.get_yscale() == "log"
        E = np.asarray(sol.outputs["totRotEnergy"])
        np.testing.assert_allclose(drift.lines[2].get_ydata(), np.abs(E - E[0]) / abs(E[0]),
                                   rtol=1e-12)  # fmt: skip
        for ax in (sigma, omega, wheels, radius, drift):
            assert ax.get_xlabel() == "t [min]"
            formatter = ax.yaxis.get_major_formatter()
            assert getattr(formatter, "offset", 0) == 0
    finally:
        plt.close(fig)


def test_demo_figure_without_wheels(sol):
    """A spacecraft without the wheel effector leaves that panel empty instead of failing."""
    nowheels = js.Solution(ts=sol.ts, ys={"hub": sol.ys["hub"]}, outputs=sol.outputs,
                           counts=sol.counts, stats=sol.stats, result=sol.result)  # fmt: skip
    fig = demo_figure(nowheels)
    try:
        assert not fig.get_axes()[3].axison
    finally:
        plt.close(fig)

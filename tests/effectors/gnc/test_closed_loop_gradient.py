"""The gradient of the Hill-frame pointing loop (`RWAttitudeFSW(guidance=HillPoint(),
tracking=AttTrackingError())` on an eccentric LEO orbit) with respect to the MRP feedback gains,
against central differences.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import effectors as fx
import jaxsim as js
from tests.effectors.gnc.test_guidance_closed_loop import SCENARIO
from tests.reference import basilisk_slew as bsl


# Central differences of a smooth closed loop (step 1e-4 relative on K): truncation ~1e-8
# relative, measured below 1e-7.
TOL_FD_REL = 1e-5


def test_closed_loop_gradient_wrt_gains_matches_central_differences():
    """d/dK and d/dP of the final Hill-frame pointing error, through 5 s of the closed loop."""
    scenario = {**SCENARIO, "guidance": "hillPoint", "duration": 5.0}
    sc, fsw, y0 = bsl.build_jaxsim(scenario)

    @jax.jit
    def loss(gains):
        ctrl = eqx.tree_at(lambda c: (c.K, c.P), fsw.control, (gains[0], gains[1]))
        f = fx.RWAttitudeFSW(fsw.clock, ctrl, fsw.mapping, guidance=fx.HillPoint(),
                             tracking=fx.AttTrackingError())  # fmt: skip
        sol = js.simulate(sc, y0, scenario["duration"], dt=scenario["dyn_dt"], solver=js.RK4(),
                          clocks=(f,), sample_dt=scenario["duration"])  # fmt: skip
        s = sol.clock_logs["fsw"]["held"]["fsw"]["sigma_BR"][-1]
        return jnp.sum(s * s)

    g0 = jnp.array([scenario["K"], scenario["P"]])
    grad = np.asarray(jax.jacfwd(loss)(g0))  # two gains: forward mode
    fd = np.zeros(2)
    for i in range(2):
        h = 1e-4 * float(g0[i])
        e = jnp.zeros(2).at[i].set(h)
        fd[i] = (float(loss(g0 + e)) - float(loss(g0 - e))) / (2 * h)
    assert np.all(np.abs(fd) > 1e-6)  # the loss depends on both gains
    np.testing.assert_allclose(grad, fd, rtol=TOL_FD_REL)

"""Worker of `tests/montecarlo/test_montecarlo.py::test_sharded_equals_unsharded` (also the tiny model the tests share).

Run as `python -m tests._sharding_worker N OUT.npz` with `XLA_FLAGS=--xla_force_host_platform_device_count=N`
and `JAX_PLATFORMS=cpu` set before jax is imported (hence a subprocess): computes one batch
unsharded, sharded over the first 2 devices and sharded over all N, and saves the results and the
shardings seen to `OUT.npz` for the test to compare.
"""

import sys

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np

import jaxsim as js
from jaxsim import montecarlo as mc


class Oscillator(js.AbstractDynamicObject):
    """Harmonic oscillator $\\ddot x = -a x$, state `[x, xdot]`: the tiny model of the tests."""

    a: jax.Array
    x0: jax.Array
    name: str = eqx.field(static=True)

    def __init__(self, a=1.0, x0=(1.0, 0.0), name="osc"):
        self.a = jnp.asarray(a, dtype=float)
        self.x0 = jnp.asarray(x0, dtype=float)
        self.name = name

    def init_state(self):
        return self.x0

    def drift(self, t, y, args):
        return jnp.stack([y[1], -self.a * y[0]])

    def outputs(self, t, y, args):
        return {"x": y[0], "E": 0.5 * y[1] ** 2 + 0.5 * self.a * y[0] ** 2}


OSC = Oscillator()
DT, T1, SAMPLE_DT = 0.1, 2.0, 0.5  # [s] 20 RK4 steps, 5 samples
DISPERSIONS = mc.Dispersions({"a": mc.Uniform(0.5, 2.0), "x0": mc.Normal(1.0, 0.1)})


def oscillator_member(p):
    """One member: spring constant `p["a"]` and initial position `p["x0"]`."""
    model = eqx.tree_at(lambda m: (m.a, m.x0), OSC, (p["a"], jnp.stack([p["x0"], 0.0])))
    return js.simulate(model, model.init_state(), T1, dt=DT, sample_dt=SAMPLE_DT, throw=False)


def main(n_devices: int, out: str) -> None:
    devices = jax.devices()
    key, n, size = jr.key(7), 28, 16
    plain = mc.run_batch(oscillator_member, DISPERSIONS, key=key, n=n, chunk_size=8)
    saved = {
        "n_devices": len(devices),
        "platform": devices[0].platform,
        "plain_x": plain.outputs["outputs"]["x"],
        "plain_a": plain.params["a"],
    }
    for tag, devs in (("two", devices[:2]), ("all", devices)):
        # One chunk of 16 members, kept on the devices: its sharding is the program's.
        whole = mc.run_batch(
            oscillator_member, DISPERSIONS, key=key, n=size, devices=devs, to_host=False
        )
        x = whole.outputs["outputs"]["x"]
        saved[f"{tag}_x"] = np.asarray(x)
        saved[f"{tag}_a"] = np.asarray(whole.params["a"])
        saved[f"{tag}_ok"] = np.asarray(whole.ok)
        saved[f"{tag}_sharding_devices"] = len(x.sharding.device_set)
        saved[f"{tag}_shard_rows"] = np.array([s.data.shape[0] for s in x.addressable_shards])
        # The same program over n = 28 members: chunks of 16 and 12 (+ 4 padding), to host.
        chunked = mc.run_batch(
            oscillator_member, DISPERSIONS, key=key, n=n, devices=devs, chunk_size=size
        )
        saved[f"{tag}_chunked_x"] = chunked.outputs["outputs"]["x"]
    np.savez(out, **saved)


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])

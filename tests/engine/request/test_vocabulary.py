"""diffrax's spellings in `simulate` (`jaxsim._request._vocabulary`): each accepted one gives bitwise the
result of jaxsim's spelling on every driver, each refused one names jaxsim's argument."""

import diffrax as dfx
import jax
import numpy as np
import pytest

import jaxsim as js
from tests._oscillator import Osc


T1 = 4.0  # [s]
ADAPTIVE = dict(solver=js.Tsit5())
TOL = dict(rtol=1e-8, atol=1e-10)


def clock():
    return js.DiscreteModel("c", js.Clock(1.0), lambda t, y, z, a: (z, {}))


MID = np.array([0.5, 1.5, 2.5])  # interior sample times [s]

# (name, model sigma, diffrax spelling, jaxsim spelling)
SAME = [
    ("dt0 fixed", 0.0, dict(dt0=0.1, sample_dt=1.0), dict(dt=0.1, sample_dt=1.0)),
    ("dt0 adaptive initial step", 0.0, dict(dt0=0.01, **ADAPTIVE, **TOL),
     dict(dt=0.01, **ADAPTIVE, **TOL)),
    ("SaveAt ts ending at t1", 0.0, dict(dt=0.1, saveat=dfx.SaveAt(ts=[1.0, 2.0, T1])),
     dict(dt=0.1, ts=[1.0, 2.0, T1])),
    ("SaveAt t0, ts, t1", 0.0, dict(dt=0.1, saveat=dfx.SaveAt(t0=True, ts=MID, t1=True)),
     dict(dt=0.1, ts=np.concatenate([[0.0], MID, [T1]]))),
    ("SaveAt t1 only", 0.0, dict(**ADAPTIVE, **TOL, saveat=dfx.SaveAt(t1=True)),
     dict(**ADAPTIVE, **TOL, ts=[T1])),
    ("SaveAt t0, t1 adaptive", 0.0, dict(**ADAPTIVE, **TOL, saveat=dfx.SaveAt(t0=True, t1=True)),
     dict(**ADAPTIVE, **TOL)),
    ("SaveAt steps", 0.0, dict(dt=0.5, saveat=dfx.SaveAt(t0=True, steps=True)),
     dict(dt=0.5, sample_dt=0.5)),
    ("SaveAt every 2nd step", 0.0, dict(dt=0.5, saveat=dfx.SaveAt(steps=2)),
     dict(dt=0.5, ts=[1.0, 2.0, 3.0, 4.0])),
    ("PIDController", 0.0, dict(**ADAPTIVE, stepsize_controller=dfx.PIDController(**TOL)),
     dict(**ADAPTIVE, **TOL)),
    ("PIDController dtmax (clocked)", 0.0,
     dict(**ADAPTIVE, stepsize_controller=dfx.PIDController(**TOL, dtmax=0.25)),
     dict(**ADAPTIVE, **TOL, dtmax=0.25)),
    ("ConstantStepSize", 0.0, dict(dt0=0.1, stepsize_controller=dfx.ConstantStepSize()),
     dict(dt=0.1)),
    ("ConstantStepSize, diffrax solver", 0.0,
     dict(solver=dfx.Tsit5(), dt0=0.1, stepsize_controller=dfx.ConstantStepSize()),
     dict(solver=dfx.Tsit5(), dt=0.1)),
    ("SDE", 0.1, dict(solver=js.EulerMaruyama(), dt0=0.01, key=0, saveat=dfx.SaveAt(ts=[2.0, T1])),
     dict(solver=js.EulerMaruyama(), dt=0.01, key=0, ts=[2.0, T1])),
    ("clocks", 0.0, dict(dt0=0.1, clocks=(clock(),), saveat=dfx.SaveAt(t0=True, ts=MID, t1=True)),
     dict(dt=0.1, clocks=(clock(),), ts=np.concatenate([[0.0], MID, [T1]]))),
    ("progress_meter off", 0.0, dict(dt=0.1, progress_meter=dfx.NoProgressMeter()), dict(dt=0.1)),
]  # fmt: skip


@pytest.mark.parametrize("name, sigma, theirs, ours", SAME, ids=[c[0] for c in SAME])
def test_diffrax_spelling_gives_the_same_run(name, sigma, theirs, ours):
    model = Osc(sigma)
    a = js.simulate(model, model.init_state(), T1, **theirs)
    b = js.simulate(model, model.init_state(), T1, **ours)
    np.testing.assert_array_equal(a.ts, b.ts)
    # The run's metadata (solver, dt, tolerances, times) is that of jaxsim's spelling too.
    assert a.info == b.info
    for x, y in zip(jax.tree.leaves((a.ys, a.stats)), jax.tree.leaves((b.ys, b.stats)),
                    strict=True):  # fmt: skip
        np.testing.assert_array_equal(x, y)


def test_progress_meter_shows_progress(capsys):
    model = Osc()
    js.simulate(model, model.init_state(), T1, dt=0.1, progress_meter=dfx.TextProgressMeter())
    jax.effects_barrier()
    assert "simulate" in capsys.readouterr().err


# (name, diffrax spelling, what the message must name)
REFUSED = [
    ("dt and dt0", dict(dt=0.1, dt0=0.1), r"`dt0`.*`dt`.*both"),
    ("ts and saveat", dict(dt=0.1, ts=[T1], saveat=dfx.SaveAt(t1=True)), r"`ts`/`sample_dt`"),
    ("rtol and PIDController", dict(**ADAPTIVE, rtol=1e-6, stepsize_controller=dfx.PIDController(
        **TOL)), r"`rtol`/`atol`.*both"),
    ("progress and meter", dict(dt=0.1, progress=True, progress_meter=dfx.TextProgressMeter()),
     r"`progress`.*both"),
    ("PID factormax", dict(**ADAPTIVE, stepsize_controller=dfx.PIDController(
        **TOL, pcoeff=0.3, icoeff=0.3, dcoeff=0.1, factormax=5.0)),
     r"factormax=5.0 has.*`rtol`, `atol`.*`dtmax`.*`pcoeff`, `icoeff`, `dcoeff`"),
    ("dtmin", dict(**ADAPTIVE, stepsize_controller=dfx.PIDController(**TOL, dtmin=1e-3)),
     r"dtmin=0.001.*no jaxsim equivalent"),
    ("ClipStepSizeController", dict(**ADAPTIVE, stepsize_controller=dfx.ClipStepSizeController(
        dfx.PIDController(**TOL), jump_ts=[1.0])), r"`discontinuities="),
    ("StepTo", dict(stepsize_controller=dfx.StepTo(ts=[0.0, 1.0, T1])), r"uniform grid: `dt`"),
    ("ConstantStepSize without a step", dict(stepsize_controller=dfx.ConstantStepSize()),
     r"`dt` \[s\]"),
    ("ConstantStepSize, jaxsim adaptive solver", dict(**ADAPTIVE, dt0=0.1,
     stepsize_controller=dfx.ConstantStepSize()), r"`solver=js.RK4\(\)`"),
    ("dense", dict(dt=0.1, saveat=dfx.SaveAt(t1=True, dense=True)), r"SaveAt\(ts=...\)"),
    ("solver state", dict(dt=0.1, saveat=dfx.SaveAt(t1=True, solver_state=True)),
     r"Solution.stats"),
    ("fn", dict(dt=0.1, saveat=dfx.SaveAt(t1=True, fn=lambda t, y, a: y["x"])),
     r"`Solution.outputs`"),
    ("subs", dict(dt=0.1, saveat=dfx.SaveAt(subs=[dfx.SubSaveAt(t1=True),
     dfx.SubSaveAt(t0=True)])), r"several `SubSaveAt`s.*`ts`"),
    ("samples ending before t1", dict(dt=0.1, saveat=dfx.SaveAt(ts=[1.0, 2.0])),
     r"SaveAt\(ts=..., t1=True\).*`t1=ts\[-1\]`"),
    ("steps, adaptive", dict(**ADAPTIVE, **TOL, saveat=dfx.SaveAt(steps=True)),
     r"`ts` / `sample_dt`"),
    ("steps off the horizon", dict(dt=0.3, saveat=dfx.SaveAt(steps=True)), r"`sample_dt`"),
    ("another meter", dict(dt=0.1, progress_meter=object()), r"`progress=True`"),
    ("unbounded steps", dict(**ADAPTIVE, **TOL, max_steps=None), r"`max_steps=10\*\*6`"),
]  # fmt: skip


@pytest.mark.parametrize("name, kwargs, named", REFUSED, ids=[c[0] for c in REFUSED])
def test_refused_with_the_jaxsim_spelling(name, kwargs, named):
    model = Osc()
    with pytest.raises(ValueError, match=named):
        js.simulate(model, model.init_state(), T1, **kwargs)

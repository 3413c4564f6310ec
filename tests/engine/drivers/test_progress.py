"""`simulate(..., progress=...)`: the reported times on every driver, the same solution as without
progress, nothing added to the program when off, one compile when switching progress on and
none for repeated calls, and the bar of `progress=True` (its "compiling" status and
rate; refused without tqdm)."""

import jax
import numpy as np
import pytest

import jaxsim as js
from tests._oscillator import Osc
from tests.helpers import compile_log


T1 = 10.0  # [s]


def noop_clock(period):
    return js.DiscreteModel("c", js.Clock(period), lambda t, y, z, a: (z, {}))


CASES = {
    # driver: keyword arguments of `simulate`
    "fixed, samples": dict(dt=0.01, sample_dt=1.0),
    "fixed, one interval in checkpoint blocks": dict(dt=0.01),
    "fixed, no checkpoint": dict(dt=0.1, sample_dt=2.0, checkpoint=False),
    "adaptive": dict(solver=js.Tsit5(), rtol=1e-8, atol=1e-10),
    "SDE fixed": dict(solver=js.EulerMaruyama(), dt=0.01, sample_dt=1.0, key=0),
    "SDE diffrax": dict(solver=js.ShARK(), dt=0.05, rtol=1e-3, atol=1e-3, key=0),
    "clocks on the grid": dict(dt=0.01, sample_dt=2.0, clocks=(noop_clock(0.5),)),
    "clocks, clocked driver": dict(solver=js.Tsit5(), rtol=1e-8, atol=1e-10,
                                 clocks=(noop_clock(2.5),)),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_reported_times_and_unchanged_solution(case):
    kw = CASES[case]
    model = Osc(0.1 if "SDE" in case else 0.0)
    seen = []
    sol = js.simulate(model, model.init_state(), T1, progress=lambda t, t1: seen.append((t, t1)),
                      **kw)  # fmt: skip
    jax.effects_barrier()
    times = np.array([t for t, _ in seen])
    assert len(seen) >= 2 and {t1 for _, t1 in seen} == {T1}
    assert np.all(np.diff(times) >= 0) and times[0] > 0.0 and times[-1] == T1
    ref = js.simulate(model, model.init_state(), T1, **kw)
    for a, b in zip(jax.tree.leaves(sol.ys), jax.tree.leaves(ref.ys)):
        np.testing.assert_array_equal(a, b)


def test_off_adds_nothing_to_the_program():
    model = Osc()

    def program(progress):
        return str(jax.make_jaxpr(lambda y: js.simulate(model, y, T1, dt=0.1, progress=progress))(
            model.init_state()))  # fmt: skip

    assert "debug_callback" not in program(False)
    assert "debug_callback" in program(lambda t, t1: None)


def test_repeated_calls_compile_once():
    model = Osc()
    previous = jax.config.jax_log_compiles
    js.simulate(model, model.init_state(), T1, dt=0.1, progress=True)
    jax.effects_barrier()
    compiled = []
    import logging

    class Catch(logging.Handler):
        def emit(self, record):
            if "Compiling" in record.getMessage():
                compiled.append(record.getMessage())

    handler = Catch()
    logging.getLogger("jax").addHandler(handler)
    jax.config.update("jax_log_compiles", True)
    try:
        for _ in range(3):
            js.simulate(model, model.init_state(), T1, dt=0.1, progress=True)
        jax.effects_barrier()
    finally:
        jax.config.update("jax_log_compiles", previous)
        logging.getLogger("jax").removeHandler(handler)
    assert compiled == []


def test_progress_true_draws_a_bar_with_compile_status_and_rate(capsys):
    model = Osc()
    js.simulate(model, model.init_state(), T1 + 1.0, dt=0.1, sample_dt=1.1, progress=True)
    jax.effects_barrier()
    err = capsys.readouterr().err
    # tqdm.auto outside Jupyter: text on stderr. The status before the first report, then the
    # simulated time reached and the rate in simulated seconds per second.
    assert "simulate:" in err and "compiling" in err
    assert "100%" in err and "11/11 sim s" in err and "sim s/s" in err


def test_progress_true_without_tqdm_is_refused(monkeypatch):
    import builtins

    model = Osc()
    real_import = builtins.__import__

    def no_tqdm(name, *args, **kwargs):
        if name.split(".")[0] == "tqdm":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_tqdm)
    with pytest.raises(
        ImportError, match=r"simulate: `progress=True`.*jaxsim-spacecraft\[progress\]"
    ):
        js.simulate(model, model.init_state(), T1, dt=0.1, progress=True)


def test_off_has_no_reporter():
    # progress=False: no reports, so the program has no host callbacks (JAX's persistent cache,
    # `jaxsim.enable_cache()`, refuses programs with them).
    from jaxsim._drivers._progress import reporter

    assert reporter(False, 0.0, 1.0) is None
    assert int(reporter(lambda t, t1: None, 0.0, 1.0).token) > 0


@pytest.mark.usefixtures("fresh_programs")
@pytest.mark.parametrize("case", list(CASES))
def test_switching_progress_on_compiles_once(case):
    """progress=False, then a callable, then True, then another callable: at most two compiled
    programs (off and on; `test_off_adds_nothing_to_the_program` shows they differ); the host
    target travels as an argument, so the calls with progress on share one."""
    kw = CASES[case]
    model = Osc(0.1 if "SDE" in case else 0.0)
    y0 = model.init_state()
    off = js.simulate(model, y0, T1, **kw)
    seen, again = [], []
    on = js.simulate(model, y0, T1, progress=lambda t, t1: seen.append(t), **kw)
    with compile_log() as later:
        js.simulate(model, y0, T1, progress=True, **kw)
        js.simulate(model, y0, T1, progress=lambda t, t1: again.append(t), **kw)
    assert later == []
    assert seen and seen[-1] == T1 and again and again[-1] == T1
    for a, b in zip(jax.tree.leaves(on.ys), jax.tree.leaves(off.ys), strict=True):
        np.testing.assert_array_equal(a, b)


def test_bad_progress_refused():
    model = Osc()
    with pytest.raises(ValueError, match=r"simulate: `progress` must be a bool or a callable"):
        js.simulate(model, model.init_state(), T1, dt=0.1, progress="yes")

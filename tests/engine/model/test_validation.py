"""Bad input raises ValueError at construction, naming the class, the argument, the unit and the value."""

import numpy as np
import pytest

import effectors as fx
import jaxsim as js


I3 = np.eye(3)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(mass=0.0, IHubPntBc_B=I3), r"Hub: `mass` must be > 0 \[kg\]; got 0"),
        (dict(mass=-5.0, IHubPntBc_B=I3), r"Hub: `mass` must be > 0 \[kg\]; got -5"),
        (dict(mass=np.nan, IHubPntBc_B=I3), r"Hub: `mass` must be finite \[kg\]"),
        (dict(mass=None, IHubPntBc_B=I3), r"Hub: `mass` \[kg\] is required"),
        (dict(mass=1.0, IHubPntBc_B=None), r"`IHubPntBc_B` \[kg m\^2\] is required"),
        (
            dict(mass=1.0, IHubPntBc_B=[[1, 2, 0], [0, 1, 0], [0, 0, 1]]),
            r"`IHubPntBc_B` must be symmetric \[kg m\^2\]",
        ),
        (
            dict(mass=1.0, IHubPntBc_B=np.diag([1.0, -1.0, 1.0])),
            r"`IHubPntBc_B` must be positive definite",
        ),
        (dict(mass=1.0, IHubPntBc_B=np.eye(2)), r"`IHubPntBc_B` must have shape \(3, 3\)"),
        (
            dict(mass=1.0, IHubPntBc_B=I3, r_BcB_B=[0.0, 1.0]),
            r"`r_BcB_B` must have shape \(3,\) \[m\]",
        ),
        (
            dict(mass=1.0, IHubPntBc_B=I3, r_BcB_B=[0.0, np.inf, 0.0]),
            r"`r_BcB_B` must be finite \[m\]",
        ),
        (dict(mass="heavy", IHubPntBc_B=I3), r"`mass` must be numeric \[kg\]"),
    ],
)
def test_hub_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        fx.Hub(**kwargs)


def test_gravity_validation():
    with pytest.raises(ValueError, match=r"PointMassGravity: `mu` must be > 0 \[m\^3/s\^2\]"):
        fx.PointMassGravity(-1.0)
    with pytest.raises(ValueError, match=r"PointMassGravity: `mu` \[m\^3/s\^2\] is required"):
        fx.PointMassGravity(None)
    with pytest.raises(ValueError, match=r"`r_PN_N` must have shape \(3,\) \[m\]"):
        fx.PointMassGravity(1.0, r_PN_N=[1.0, 2.0])
    C = np.zeros((3, 3))
    C[0, 0] = 1.0
    with pytest.raises(ValueError, match=r"SphericalHarmonicGravity: `radius` must be > 0 \[m\]"):
        fx.SphericalHarmonicGravity(1.0, 0.0, C)
    with pytest.raises(ValueError, match=r"`C` \[-\] must be square"):
        fx.SphericalHarmonicGravity(1.0, 1.0, np.zeros((3, 2)))
    with pytest.raises(ValueError, match=r"`S` must have shape \(3, 3\)"):
        fx.SphericalHarmonicGravity(1.0, 1.0, C, np.zeros((2, 2)))
    with pytest.raises(ValueError, match=r"`degree` must be in \[0, 2\]"):
        fx.SphericalHarmonicGravity(1.0, 1.0, C, degree=5)
    with pytest.raises(ValueError, match=r"`order` must be in \[0, degree=2\]"):
        fx.SphericalHarmonicGravity(1.0, 1.0, C, order=3)
    with pytest.raises(ValueError, match=r"`dcm_PN` must be a proper orthonormal DCM"):
        fx.SphericalHarmonicGravity(1.0, 1.0, C, dcm_PN=np.diag([1.0, 1.0, 2.0]))
    a = fx.PointMassGravity(1.0, central=True, name="a")
    b = fx.PointMassGravity(1.0, central=True, name="b")
    with pytest.raises(
        ValueError, match=r"Spacecraft: `gravity` may flag at most one central body"
    ):
        fx.Spacecraft(fx.Hub(1.0, I3), gravity=(a, b))


def test_dynamic_effector_validation():
    with pytest.raises(ValueError, match=r"ExtForceTorque: `force_N` must have shape \(3,\) \[N\]"):
        fx.ExtForceTorque(force_N=[1.0, 2.0])
    with pytest.raises(ValueError, match=r"ExtForceTorque: `torque_B` must be finite \[N m\]"):
        fx.ExtForceTorque(torque_B=[np.nan, 0.0, 0.0])
    with pytest.raises(ValueError, match=r"ExtForceTorque: `name` must be a non-empty string"):
        fx.ExtForceTorque(name="")
    with pytest.raises(ValueError, match=r"GravityGradient: `bodies`"):
        fx.GravityGradient(())


def test_spacecraft_validation():
    with pytest.raises(ValueError, match=r"Spacecraft: `hub` must be a Hub"):
        fx.Spacecraft("hub")
    with pytest.raises(
        ValueError, match=r"`dynamic_effectors\[0\]` must be a AbstractDynamicEffector"
    ):
        fx.Spacecraft(fx.Hub(1.0, I3), dynamic_effectors=(fx.PointMassGravity(1.0),))
    sc = fx.Spacecraft(fx.Hub(1.0, I3))
    with pytest.raises(
        ValueError, match=r"Spacecraft.init_state: `r_CN_N` must have shape \(3,\) \[m\]"
    ):
        sc.init_state([1.0, 2.0])
    with pytest.raises(
        ValueError, match=r"Spacecraft.init_state: `omega_BN_B` must be finite \[rad/s\]"
    ):
        sc.init_state(omega_BN_B=[0.0, np.nan, 0.0])
    with pytest.raises(ValueError, match=r"`effector_states` has unknown effector name"):
        sc.init_state(effector_states={"wheels": {}})


def test_signal_and_system_validation():
    with pytest.raises(ValueError, match=r"PiecewiseConstant: `values` must have shape"):
        js.PiecewiseConstant([1.0, 2.0], [0.0, 1.0])
    with pytest.raises(ValueError, match=r"PiecewiseConstant: `times` \[s\] must be increasing"):
        js.PiecewiseConstant([2.0, 1.0], [0.0, 1.0, 2.0])
    with pytest.raises(ValueError, match=r"System: `objects` must hold at least one"):
        js.System([])
    with pytest.raises(
        ValueError, match=r"System: `objects\[0\]` must be an AbstractDynamicObject"
    ):
        js.System([1.0])


def test_validated_model_values_are_kept_on_error():
    """A failed construction leaves the user's inputs untouched (nothing the user gave is lost)."""
    inertia = np.diag([1.0, -1.0, 1.0])
    before = inertia.copy()
    with pytest.raises(ValueError):
        fx.Hub(1.0, inertia)
    np.testing.assert_array_equal(inertia, before)

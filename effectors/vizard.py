r"""Export a run to a Vizard binary file, to replay it in Basilisk's visualiser (Vizard).

`write_vizard` turns the samples of a `Solution` of an `effectors.Spacecraft` (or of a `jaxsim.System`
of spacecraft) into the file Vizard opens with "Open File": one `VizMessage` per saved sample, in the
message format Basilisk defines in its open `vizMessage.proto` (package `vizProtobufferMessage`,
proto3). `read_vizard` reads such a file back (ours or one Basilisk's `vizInterface` saved).

```python
import effectors as fx

sol = js.simulate(sc, y0, 600.0, dt=0.1, sample_dt=1.0)
fx.write_vizard("run.bin", sol, sc)           # then open run.bin in Vizard
msgs = fx.read_vizard("run.bin")              # one VizMessage per sample
```

**File layout** (as Basilisk's `vizInterface` writes a save file): the messages one after another, each
preceded by its length in bytes as a protobuf base-128 varint (7 bits per byte, least significant
group first, high bit set on every byte but the last); no header, no trailer. The message schema is
built in code here (`google.protobuf.descriptor_pb2`, no `protoc` step) with Basilisk's package,
message and field names, numbers and types, for the subset written; fields of Vizard's format that
are not written are unknown to this schema, and `read_vizard` keeps them as unknown fields.

**What is written**, in Basilisk's units and conventions:

- every message: `currentTime` (`frameNumber` = sample index from 0, `simTimeElapsed` = sample time
  [ns] rounded to the nanosecond, Basilisk's clock resolution); `celestialBodies`: each gravity body
  of the spacecraft (by `name`, which Vizard looks up in its body dictionary: `"earth"`, `"moon"`,
  `"sun"`, `"mars barycenter"`, ...), its position and velocity [m], [m/s] in $\mathcal N$ at the sample
  time, its orientation $[PN]$ (row-major; `SphericalHarmonicGravity.dcm_PN`, else the identity),
  `mu` [km^3/s^2], `radiusEq` [km] (spherical harmonics only; 0, Vizard's default, otherwise) and
  `radiusRatio` 1; `spacecraft`: per spacecraft its name, hub position $\mathbf r_{B/N}$ [m], velocity
  $\mathbf v_{B/N}$ [m/s] (Vizard wants metres, not kilometres) and attitude as the MRP
  $\boldsymbol\sigma_{B/N}$ (three numbers: Vizard's `rotation` field is an MRP, despite the "DCM" in the
  .proto comment; Basilisk writes `sigma_BN` there), and one `ReactionWheel` per wheel of every
  `ReactionWheels` effector: `wheelSpeed` $\Omega$ [rad/s], `wheelTorque` (the applied motor torque
  `u_s`) [N m], `spinAxisVector` $\hat{\mathbf g}_s$ and `position` $\mathbf r_{W/B}$ [m] in $\mathcal B$,
  `maxSpeed` / `maxTorque` [rad/s], [N m] (-1 when unlimited, Basilisk's convention);
- the first message only: `epoch` (the calendar date of $t = 0$), and `settings` with the RW panel
  and HUD switched on for spacecraft with wheels, a box model per panel (below), and -1 ("Vizard's
  default", as Basilisk sends them) for the ambient light, spacecraft shadow brightness and size
  multipliers, whose protobuf default 0 would mean no light and zero size.

**Hinged panels.** Vizard has no hinge or panel-angle field. A panel is shown the way Basilisk's
`vizSupport` shows one: as an extra `Spacecraft` entry whose `parentSpacecraftName` is the hub's
name (Vizard treats it as a component of that spacecraft), with the pose of the panel frame
$\mathcal S$ at the panel centre of mass $S$: position $\mathbf r_{S/N}$, velocity $\mathbf v_{S/N}$ and
MRP $\boldsymbol\sigma_{S/N}$ (the `HingedRigidBodies` outputs `r_SN_N`, `v_SN_N`, `sigma_SN`). Its name
is `"<spacecraft>_<effector name>_<panel index>"`. So that it is not drawn as a second satellite, the
first message's settings give it a custom model: Vizard's built-in `"CUBE"` scaled to
`(length, width, thickness)` along $\hat{\mathbf s}_1, \hat{\mathbf s}_2, \hat{\mathbf s}_3$ and centred on $S$.

**Not written:** thrusters, sensors and the other effectors (Vizard has fields for thrusters and
sensors; not exported yet); hub angular velocity and accelerations (the format has no field for
them: Vizard interpolates the poses); the sun, unless it is a gravity body. Basilisk's
`vizInterface` writes no message at $t = 0$ (it starts at the first step); this writer writes every
saved sample, including the first, so frame $k$ here is frame $k$ of Basilisk's file of the same run.
Protobuf is imported only when a function is called: install the `vizard` extra
(`pip install 'jaxsim-spacecraft[vizard]'`).

**Reference:** Basilisk's `src/utilities/vizProtobuffer/vizMessage.proto` and
`src/simulation/vizard/vizInterface/vizInterface.cpp` (AVS Lab, University of Colorado; ISC
licence), and the Vizard documentation, https://avslab.github.io/basilisk/Vizard/Vizard.html;
protobuf wire format: https://protobuf.dev/programming-guides/encoding/.
"""

import datetime as _dt
import functools
import os
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import ArrayLike, Float

import jaxsim as js
from jaxsim.results import refuse_existing, replace_safely
from jaxsim.signals import evaluate

from ._actuators._reaction_wheels import ReactionWheels
from ._bodies._hinged_rigid_bodies import HingedRigidBodies
from ._forces._gravity import SphericalHarmonicGravity
from ._spacecraft._assembly import Spacecraft


__all__ = ["read_vizard", "write_vizard"]

_WHERE = "write_vizard"
_PACKAGE = "vizProtobufferMessage"
# Basilisk's default epoch (`simDefinitions.h`), written when none is given.
_DEFAULT_EPOCH = _dt.datetime(2019, 1, 1)
_NS_PER_S = 1e9
_M3_PER_KM3 = 1e9
_M_PER_KM = 1e3
# Default panel box when the hinge-to-CoM distance d is 0 (no length scale in the model) [m].
_DEFAULT_PANEL_EDGE = 1.0
# Default panel thickness as a fraction of the smaller of its length and width.
_THICKNESS_FRACTION = 0.05
_ON = 1  # Vizard's tri-state switches: 0 = Vizard default, -1 = off, 1 = on
# Settings whose protobuf default 0 is a value (no light, zero size), not "Vizard's default": sent
# as -1 (Vizard's default), as Basilisk's `vizInterface` does with its default settings.
_VIZ_DEFAULT = -1.0
_DEFAULTED_SETTINGS = (
    "ambient",
    "spacecraftShadowBrightness",
    "spacecraftSizeMultiplier",
    "celestialBodyHelioViewSizeMultiplier",
    "spacecraftHelioViewSizeMultiplier",
)


# --------------------------------------------------------------------------------------------------
# The schema: Basilisk's message, field names, numbers and types (the subset written), built in code


_DOUBLE, _INT32, _INT64, _STRING, _MESSAGE = "double", "int32", "int64", "string", "message"

# {message name: [(field name, number, type, repeated, message type name or None)]}; nested in
# VizMessage, as in Basilisk's file.
_FIELDS = {
    "EpochDateTime": [
        ("year", 1, _INT32, False, None),
        ("month", 2, _INT32, False, None),
        ("day", 3, _INT32, False, None),
        ("hours", 4, _INT32, False, None),
        ("minutes", 5, _INT32, False, None),
        ("seconds", 6, _DOUBLE, False, None),
    ],
    "TimeStamp": [
        ("frameNumber", 1, _INT64, False, None),
        ("simTimeElapsed", 2, _DOUBLE, False, None),
    ],
    "CelestialBody": [
        ("bodyName", 1, _STRING, False, None),
        ("position", 2, _DOUBLE, True, None),
        ("velocity", 3, _DOUBLE, True, None),
        ("rotation", 4, _DOUBLE, True, None),
        ("mu", 5, _DOUBLE, False, None),
        ("radiusEq", 6, _DOUBLE, False, None),
        ("radiusRatio", 7, _DOUBLE, False, None),
        ("modelDictionaryKey", 8, _STRING, False, None),
    ],
    "ReactionWheel": [
        ("position", 2, _DOUBLE, True, None),
        ("spinAxisVector", 4, _DOUBLE, True, None),
        ("wheelSpeed", 5, _DOUBLE, False, None),
        ("wheelTorque", 6, _DOUBLE, False, None),
        ("maxSpeed", 7, _DOUBLE, False, None),
        ("maxTorque", 8, _DOUBLE, False, None),
    ],
    "Spacecraft": [
        ("spacecraftName", 1, _STRING, False, None),
        ("position", 2, _DOUBLE, True, None),
        ("velocity", 3, _DOUBLE, True, None),
        ("rotation", 4, _DOUBLE, True, None),
        ("reactionWheels", 5, _MESSAGE, True, "ReactionWheel"),
        ("modelDictionaryKey", 13, _STRING, False, None),
        ("parentSpacecraftName", 19, _STRING, False, None),
    ],
    "ActuatorSettings": [
        ("spacecraftName", 1, _STRING, False, None),
        ("viewRWPanel", 4, _INT32, False, None),
        ("viewRWHUD", 5, _INT32, False, None),
    ],
    "CustomModel": [
        ("modelPath", 1, _STRING, False, None),
        ("simBodiesToModify", 2, _STRING, True, None),
        ("offset", 3, _DOUBLE, True, None),
        ("rotation", 4, _DOUBLE, True, None),
        ("scale", 5, _DOUBLE, True, None),
    ],
    "VizSettingsPb": [
        ("ambient", 1, _DOUBLE, False, None),
        ("actuatorSettings", 10, _MESSAGE, True, "ActuatorSettings"),
        ("customModels", 12, _MESSAGE, True, "CustomModel"),
        ("spacecraftShadowBrightness", 35, _DOUBLE, False, None),
        ("spacecraftSizeMultiplier", 36, _DOUBLE, False, None),
        ("celestialBodyHelioViewSizeMultiplier", 47, _DOUBLE, False, None),
        ("spacecraftHelioViewSizeMultiplier", 49, _DOUBLE, False, None),
    ],
}
_TOP_FIELDS = [
    ("currentTime", 1, _MESSAGE, False, "TimeStamp"),
    ("celestialBodies", 2, _MESSAGE, True, "CelestialBody"),
    ("spacecraft", 3, _MESSAGE, True, "Spacecraft"),
    ("settings", 7, _MESSAGE, False, "VizSettingsPb"),
    ("epoch", 8, _MESSAGE, False, "EpochDateTime"),
]


def _protobuf():
    try:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    except ImportError as err:
        raise ImportError(
            "effectors.vizard needs protobuf (Google's protocol buffers) to write and read Vizard "
            "files; install the `vizard` extra: pip install 'jaxsim-spacecraft[vizard]'."
        ) from err
    return descriptor_pb2, descriptor_pool, message_factory


@functools.cache
def vizard_message_class():
    """The `VizMessage` class (a protobuf message type) of the schema this module writes.

    Built once from a `FileDescriptorProto` in a private descriptor pool (so it never clashes with
    another copy of Basilisk's schema loaded in the same process).
    """
    descriptor_pb2, descriptor_pool, message_factory = _protobuf()
    F = descriptor_pb2.FieldDescriptorProto
    types = {
        _DOUBLE: F.TYPE_DOUBLE,
        _INT32: F.TYPE_INT32,
        _INT64: F.TYPE_INT64,
        _STRING: F.TYPE_STRING,
        _MESSAGE: F.TYPE_MESSAGE,
    }

    def add_fields(msg, fields):
        for name, number, kind, repeated, type_name in fields:
            f = msg.field.add(name=name, number=number, type=types[kind])
            f.label = F.LABEL_REPEATED if repeated else F.LABEL_OPTIONAL
            if type_name is not None:
                f.type_name = f".{_PACKAGE}.VizMessage.{type_name}"

    file = descriptor_pb2.FileDescriptorProto(
        name="jaxsim_vizMessage.proto", package=_PACKAGE, syntax="proto3"
    )
    top = file.message_type.add(name="VizMessage")
    for name, fields in _FIELDS.items():
        add_fields(top.nested_type.add(name=name), fields)
    add_fields(top, _TOP_FIELDS)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    descriptor = pool.FindMessageTypeByName(f"{_PACKAGE}.VizMessage")
    return message_factory.GetMessageClass(descriptor)


# --------------------------------------------------------------------------------------------------
# Framing: a base-128 varint length before each message


def _limit(value):
    """A wheel limit as Vizard shows it: -1 (none) when the limit group is unset (`None`)."""
    return np.asarray(-1.0 if value is None else value, dtype=float)


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def read_vizard(path: str | os.PathLike[str]) -> list:
    """The messages of a Vizard binary file, decoded with this module's schema.

    **Arguments:**

    - `path`: a file written by `write_vizard` or saved by Basilisk's `vizInterface`.

    **Returns:** a list of `VizMessage` objects (protobuf messages; e.g. `msgs[k].spacecraft[0].position`).
    Fields of Vizard's format outside this module's schema are kept as unknown fields.

    Raises `ValueError` if the file does not split into length-prefixed messages.
    """
    cls = vizard_message_class()
    data = pathlib.Path(path).read_bytes()
    msgs, i = [], 0
    while i < len(data):
        start, size, shift = i, 0, 0
        while True:
            if i >= len(data) or shift > 63:
                raise ValueError(
                    f"read_vizard: `path` {str(path)!r} is not a Vizard file: the length prefix "
                    f"of message {len(msgs)} at byte {start} is cut off or malformed."
                )
            byte = data[i]
            i += 1
            size |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                break
        if i + size > len(data):
            raise ValueError(
                f"read_vizard: `path` {str(path)!r} is not a complete Vizard file: message "
                f"{len(msgs)} at byte {start} declares {size} bytes; {len(data) - i} remain."
            )
        msgs.append(cls.FromString(data[i : i + size]))
        i += size
    return msgs


# --------------------------------------------------------------------------------------------------
# Validation of the inputs


def _fail(arg, expected, unit, value):
    unit = f" [{unit}]" if unit else ""
    raise ValueError(f"{_WHERE}: `{arg}` {expected}{unit}; got {value}.")


def _get(container, key):
    if isinstance(container, dict):
        return container.get(key)
    return getattr(container, key, None)


def _spacecraft_of(model, spacecraft_name):
    """`[(vizard name, Spacecraft, key into the outputs or None)]`."""
    if isinstance(model, Spacecraft):
        name = model.name if spacecraft_name is None else spacecraft_name
        if not isinstance(name, str) or not name:
            _fail("spacecraft_name", "must be a non-empty string", "", repr(name))
        return [(name, model, None)]
    if isinstance(model, js.System):
        if spacecraft_name is not None:
            _fail(
                "spacecraft_name",
                "applies to a single Spacecraft (a System's spacecraft keep their names)",
                "",
                repr(spacecraft_name),
            )
        found = [(o.name, o, o.name) for o in model.objects if isinstance(o, Spacecraft)]
        if found:
            return found
        raise TypeError(
            f"{_WHERE}: `model` must be an effectors.Spacecraft or a jaxsim.System holding at least "
            f"one; got a System of {[type(o).__name__ for o in model.objects]}."
        )
    raise TypeError(
        f"{_WHERE}: `model` must be an effectors.Spacecraft or a jaxsim.System of them (the model "
        f"that was simulated); got {type(model).__name__}."
    )


def _series(outputs, keys, width, n_lead, what):
    """`outputs[k0][k1]...` as a float array of shape `lead + (width...)`."""
    value = outputs
    for k in keys:
        value = value.get(k) if isinstance(value, dict) else None
    if value is None:
        path = "".join(f"[{k!r}]" for k in keys)
        _fail(
            "sol",
            f"must hold `outputs{path}` ({what}); run `simulate` with outputs=True (the default) "
            "on this model",
            "",
            f"outputs keys {sorted(outputs) if isinstance(outputs, dict) else type(outputs).__name__}",
        )
    arr = np.asarray(value, dtype=float)
    if arr.ndim != n_lead + len(width) or arr.shape[n_lead:] != width:
        path = "".join(f"[{k!r}]" for k in keys)
        _fail(f"sol.outputs{path}", f"must have trailing shape {width}", "", f"shape {arr.shape}")
    return arr


def _epoch_fields(epoch):
    if epoch is None:
        epoch = _DEFAULT_EPOCH
    if not isinstance(epoch, _dt.datetime):
        raise TypeError(
            f"{_WHERE}: `epoch` must be a datetime.datetime (the UTC date at t = 0) or None; "
            f"got {type(epoch).__name__}."
        )
    if epoch.tzinfo is not None:
        epoch = epoch.astimezone(_dt.UTC).replace(tzinfo=None)
    seconds = epoch.second + epoch.microsecond * 1e-6
    return dict(
        year=epoch.year,
        month=epoch.month,
        day=epoch.day,
        hours=epoch.hour,
        minutes=epoch.minute,
        seconds=seconds,
    )


def _panel_sizes(panel_size, panel_effs):
    """(total panels, 3) box edges [m]: length along s1, width along s2, thickness along s3."""
    d = np.concatenate([np.asarray(e.d, dtype=float) for e in panel_effs]) if panel_effs else []
    total = len(d)
    if panel_size is None:
        length = np.where(np.asarray(d) > 0, 2.0 * np.asarray(d), _DEFAULT_PANEL_EDGE)
        width = np.where(np.asarray(d) > 0, np.asarray(d), _DEFAULT_PANEL_EDGE)
        thick = _THICKNESS_FRACTION * np.minimum(length, width)
        return np.stack([length, width, thick], axis=-1).reshape(total, 3)
    try:
        size = np.asarray(panel_size, dtype=float)
    except (TypeError, ValueError):
        _fail("panel_size", "must be numeric (length, width, thickness)", "m", repr(panel_size))
    if size.shape == (3,):
        size = np.broadcast_to(size, (total, 3))
    if size.shape != (total, 3):
        _fail(
            "panel_size",
            f"must have shape (3,) or ({total}, 3) (one row per panel)",
            "m",
            f"shape {size.shape}",
        )
    if not np.all(np.isfinite(size)) or np.any(size <= 0):
        _fail("panel_size", "must be finite and > 0", "m", np.array2string(size, separator=", "))
    return size


# --------------------------------------------------------------------------------------------------
# The writer


def _body_states(body, ts):
    """Position [m], velocity [m/s] and [PN] (row-major) of a gravity body at the times `ts`."""
    t = jnp.asarray(ts, dtype=float)

    def at(ti):
        r, v = jax.jvp(body.position, (ti,), (jnp.ones_like(ti),))
        if isinstance(body, SphericalHarmonicGravity):
            dcm = jnp.asarray(evaluate(body.dcm_PN, ti), dtype=float)
        else:
            dcm = jnp.eye(3)
        return jnp.broadcast_to(r, (3,)), jnp.broadcast_to(v, (3,)), dcm

    r, v, dcm = jax.vmap(at)(t)
    return np.asarray(r), np.asarray(v), np.asarray(dcm).reshape(len(ts), 9)


def write_vizard(
    path: str | os.PathLike[str],
    sol: js.Solution,
    model: Spacecraft | js.System,
    *,
    member: int | None = None,
    spacecraft_name: str | None = None,
    central_body: str | None = "earth",
    epoch: _dt.datetime | None = None,
    panel_size: Float[ArrayLike, "*p 3"] | None = None,
    show_wheels: bool = True,
    model_key: str = "",
    overwrite: bool = False,
) -> pathlib.Path:
    r"""Write a run as a Vizard binary file: one `VizMessage` per saved sample (see the module docs).

    **Arguments:**

    - `path`: the file to write; Vizard's file dialog looks for `.bin`. Written under a temporary
      name and moved into place when complete (a failed write leaves an earlier file as it was).
    - `sol`: the `Solution` of `jaxsim.simulate(model, ...)` with its outputs (the default
      `outputs=True`): hub `r_BN_N`, `v_BN_N`, `sigma_BN`; wheels `Omega`, `u_s`; panels `r_SN_N`,
      `v_SN_N`, `sigma_SN`. Samples after `sol.t_final` (a terminal event) are left out.
    - `model`: the `effectors.Spacecraft` that was simulated, or a `jaxsim.System` (each of its
      `Spacecraft` objects becomes a Vizard spacecraft named after it; other objects are skipped).
    - `member`: for a batched solution (`jax.vmap` / Monte Carlo: a leading member axis on every
      output), the index of the run to write; required there, refused on a single run.
    - `spacecraft_name`: the hub's name in Vizard (default `model.name`); single spacecraft only.
    - `central_body`: a celestial body written at the origin of $\mathcal N$ (zero position, identity
      orientation) when the spacecraft has no gravity body, so that Vizard has a scene centre;
      `None`: none. With gravity bodies, those are written instead.
    - `epoch`: `datetime.datetime` of $t = 0$ (naive means UTC); default Basilisk's 2019-01-01 00:00:00.
    - `panel_size`: `(length, width, thickness)` [m] of the box drawn for each hinged panel, for all
      panels or one row per panel `(p, 3)` (panels in effector order); default `(2d, d, 0.05 d)`
      from the hinge-to-CoM distance `d` (a 1 m square for `d = 0`).
    - `show_wheels`: switch on Vizard's reaction-wheel panel and HUD for spacecraft with wheels.
    - `model_key`: Vizard model of the hub(s): `""` (default `bskSat`), `"6USat"`, `"3USat"`, or a
      key of Vizard's model dictionary.
    - `overwrite`: replace an existing file at `path` (default: refused with a `FileExistsError`
      before anything is computed).

    **Returns:** the path written, as a `pathlib.Path`.

    Raises `TypeError` for a model that is not a spacecraft, `ValueError` for a solution without
    the outputs above, without samples, with non-finite values in a written sample or batched
    without `member`, `OSError` when `path` cannot be written (`FileExistsError` when it exists
    and `overwrite` is False), `ImportError` without protobuf.

    !!! example
        ```python
        sol = js.simulate(sc, y0, 600.0, dt=0.1, sample_dt=1.0)
        fx.write_vizard("slew.bin", sol, sc, epoch=datetime.datetime(2026, 3, 20, 12))
        ```
    """
    refuse_existing(pathlib.Path(os.fspath(path)), overwrite, _WHERE, "`overwrite=True`")
    cls = vizard_message_class()
    ships = _spacecraft_of(model, spacecraft_name)
    if central_body is not None and (not isinstance(central_body, str) or not central_body):
        _fail("central_body", "must be a body name (str) or None", "", repr(central_body))
    if not isinstance(model_key, str):
        _fail("model_key", "must be a string", "", repr(model_key))
    epoch_fields = _epoch_fields(epoch)

    # The run: sample times and outputs, one member of a batch
    ts, outputs = _get(sol, "ts"), _get(sol, "outputs")
    if ts is None:
        raise TypeError(
            f"{_WHERE}: `sol` must be the Solution of jaxsim.simulate; got {type(sol).__name__}."
        )
    if not isinstance(outputs, dict):
        _fail(
            "sol",
            "must carry its outputs (run `simulate` with outputs=True, the default)",
            "",
            f"outputs={type(outputs).__name__}",
        )
    first = outputs if ships[0][2] is None else outputs.get(ships[0][2], {})
    sigma = first.get("sigma_BN") if isinstance(first, dict) else None
    if sigma is None:
        _fail(
            "sol",
            "must be a run of `model` (no hub attitude `sigma_BN` in its outputs; is it the "
            "solution of another model?)",
            "",
            f"outputs keys {sorted(outputs)}",
        )
    batched = np.ndim(sigma) == 3
    ts = np.asarray(ts, dtype=float)
    t_final = _get(sol, "t_final")
    if batched:
        if member is None:
            _fail(
                "member",
                f"must pick one run of this batched solution ({np.shape(sigma)[0]} members)",
                "",
                "None",
            )
        count = np.shape(sigma)[0]
        if not isinstance(member, (int, np.integer)) or not 0 <= member < count:
            _fail("member", f"must be an integer index in [0, {count})", "", repr(member))
        outputs = jax.tree_util.tree_map(lambda a: np.asarray(a)[member], outputs)
        ts = ts[member] if ts.ndim == 2 else ts
        if t_final is not None and np.ndim(t_final) == 1:
            t_final = np.asarray(t_final)[member]
    elif member is not None:
        _fail("member", "must be None for a single run (not batched)", "", repr(member))
    if ts.ndim != 1:
        _fail("sol.ts", "must be one run's sample times (1-D)", "s", f"shape {ts.shape}")
    keep = np.isfinite(ts)
    if t_final is not None and np.ndim(t_final) == 0 and np.isfinite(float(t_final)):
        keep &= ts <= float(t_final)
    n_all = ts.shape[0]
    ts = ts[keep]
    n = ts.shape[0]
    if n == 0:
        _fail("sol", "must hold at least one saved sample", "s", f"ts of shape ({n_all},)")

    def trimmed(keys, width, what, scope):
        arr = _series(scope, keys, width, 1, what)
        if arr.shape[0] != n_all:
            _fail("sol", f"must have {n_all} samples in `outputs{keys}`", "", arr.shape[0])
        return arr[keep]

    # Per spacecraft: hub, wheels, panels (checked before the file is opened)
    craft = []
    bodies = {}
    for name, sc, key in ships:
        scope = outputs if key is None else outputs.get(key, {})
        entry = {
            "name": name,
            "r": trimmed(("r_BN_N",), (3,), "hub position [m]", scope),
            "v": trimmed(("v_BN_N",), (3,), "hub velocity [m/s]", scope),
            "sigma": trimmed(("sigma_BN",), (3,), "hub attitude MRP", scope),
            "wheels": [],
            "panels": [],
        }
        for e in sc.state_effectors:
            if isinstance(e, ReactionWheels):
                k = e.num_wheels
                entry["wheels"].append(
                    {
                        "Omega": trimmed((e.name, "Omega"), (k,), "wheel speeds [rad/s]", scope),
                        "u_s": trimmed((e.name, "u_s"), (k,), "motor torques [N m]", scope),
                        "gsHat_B": np.broadcast_to(np.asarray(e.gsHat_B, dtype=float), (k, 3)),
                        "rWB_B": np.broadcast_to(np.asarray(e.rWB_B, dtype=float), (k, 3)),
                        "Omega_max": np.broadcast_to(_limit(e.Omega_max), (k,)),
                        "u_max": np.broadcast_to(_limit(e.u_max), (k,)),
                    }
                )
            elif isinstance(e, HingedRigidBodies):
                p = e.num_panels
                entry["panels"].append(
                    (
                        e,
                        trimmed((e.name, "r_SN_N"), (p, 3), "panel positions [m]", scope),
                        trimmed((e.name, "v_SN_N"), (p, 3), "panel velocities [m/s]", scope),
                        trimmed((e.name, "sigma_SN"), (p, 3), "panel attitude MRPs", scope),
                    )
                )
        entry["sizes"] = _panel_sizes(panel_size, [pe[0] for pe in entry["panels"]])
        for b in sc.gravity:
            bodies.setdefault(b.name, b)
        craft.append(entry)
    _check_finite(craft, ts)

    body_rows = []
    for b in bodies.values():
        r, v, dcm = _body_states(b, ts)
        radius = float(b.radius) / _M_PER_KM if isinstance(b, SphericalHarmonicGravity) else 0.0
        body_rows.append((b.name, r, v, dcm, float(b.mu) / _M3_PER_KM3, radius))
    if not body_rows and central_body is not None:
        zeros = np.zeros((n, 3))
        body_rows.append((central_body, zeros, zeros, np.tile(np.eye(3).ravel(), (n, 1)), 0, 0))

    settings = cls.VizSettingsPb(**dict.fromkeys(_DEFAULTED_SETTINGS, _VIZ_DEFAULT))
    for entry in craft:
        if show_wheels and entry["wheels"]:
            settings.actuatorSettings.add(
                spacecraftName=entry["name"], viewRWPanel=_ON, viewRWHUD=_ON
            )
        names = _panel_names(entry)
        for pname, size in zip(names, entry["sizes"]):
            settings.customModels.add(
                modelPath="CUBE",
                simBodiesToModify=[pname],
                offset=[0.0, 0.0, 0.0],
                rotation=[0.0, 0.0, 0.0],
                scale=size.tolist(),
            )

    path = pathlib.Path(os.fspath(path))
    with replace_safely(path, overwrite=overwrite, where=_WHERE) as tmp:
        try:
            stream = open(tmp, "wb")
        except OSError as err:
            raise OSError(
                f"{_WHERE}: `path` {str(path)!r} cannot be opened for writing: "
                f"{err.strerror or err}."
            ) from err
        with stream:
            for k in range(n):
                msg = cls()
                msg.currentTime.frameNumber = k
                msg.currentTime.simTimeElapsed = float(np.round(ts[k] * _NS_PER_S))
                for bname, r, v, dcm, mu, radius in body_rows:
                    msg.celestialBodies.add(
                        bodyName=bname,
                        position=r[k].tolist(),
                        velocity=v[k].tolist(),
                        rotation=dcm[k].tolist(),
                        mu=mu,
                        radiusEq=radius,
                        radiusRatio=1.0,
                    )
                for entry in craft:
                    _add_spacecraft(msg, entry, k, model_key if k == 0 else "")
                if k == 0:
                    msg.settings.CopyFrom(settings)
                    msg.epoch.SetInParent()
                    for field, value in epoch_fields.items():
                        setattr(msg.epoch, field, value)
                data = msg.SerializeToString()
                stream.write(_varint(len(data)))
                stream.write(data)
    return path


def _panel_names(entry):
    return [
        f"{entry['name']}_{e.name}_{i}" for e, *_ in entry["panels"] for i in range(e.num_panels)
    ]


def _check_finite(craft, ts):
    for entry in craft:
        arrays = [("r_BN_N", entry["r"]), ("v_BN_N", entry["v"]), ("sigma_BN", entry["sigma"])]
        for w in entry["wheels"]:
            arrays += [("Omega", w["Omega"]), ("u_s", w["u_s"])]
        for e, r, v, s in entry["panels"]:
            arrays += [(f"{e.name}.r_SN_N", r), (f"{e.name}.v_SN_N", v), (f"{e.name}.sigma_SN", s)]
        for label, arr in arrays:
            bad = ~np.all(np.isfinite(arr.reshape(arr.shape[0], -1)), axis=1)
            if np.any(bad):
                k = int(np.argmax(bad))
                _fail(
                    "sol",
                    f"must hold finite values in every written sample ({entry['name']} {label} "
                    f"at sample {k}, t = {ts[k]} s; did the run fail? see `sol.result`)",
                    "",
                    np.array2string(arr[k], separator=", "),
                )


def _add_spacecraft(msg, entry, k, model_key):
    sc = msg.spacecraft.add(
        spacecraftName=entry["name"],
        position=entry["r"][k].tolist(),
        velocity=entry["v"][k].tolist(),
        rotation=entry["sigma"][k].tolist(),
    )
    if model_key:
        sc.modelDictionaryKey = model_key
    for w in entry["wheels"]:
        for j in range(w["Omega"].shape[1]):
            sc.reactionWheels.add(
                position=w["rWB_B"][j].tolist(),
                spinAxisVector=w["gsHat_B"][j].tolist(),
                wheelSpeed=float(w["Omega"][k, j]),
                wheelTorque=float(w["u_s"][k, j]),
                maxSpeed=float(w["Omega_max"][j]),
                maxTorque=float(w["u_max"][j]),
            )
    names = iter(_panel_names(entry))
    for _, r, v, s in entry["panels"]:
        for i in range(r.shape[1]):
            msg.spacecraft.add(
                spacecraftName=next(names),
                position=r[k, i].tolist(),
                velocity=v[k, i].tolist(),
                rotation=s[k, i].tolist(),
                parentSpacecraftName=entry["name"],
            )

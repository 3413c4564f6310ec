r"""Space-weather inputs of the atmosphere models: the F10.7 solar flux and the Ap geomagnetic index,
read from CelesTrak's space-weather file format (`SW-All.csv`) or held constant for studies.

CelesTrak's CSV has one row a day (`DATE` `YYYY-MM-DD`), with the eight 3-hourly indices `AP1`..`AP8`
(00-03 h UT, ..., 21-24 h UT), their mean `AP_AVG` (the daily Ap), the observed flux `F10.7_OBS`
(at the Earth-Sun distance, the one NRLMSISE-00 takes) and its 81-day average centred on the day,
`F10.7_OBS_CENTER81`. Rows of monthly predictions (`F10.7_DATA_TYPE` `PRM`) have no Ap values.

At a UTC instant the NRLMSISE-00 inputs are: F10.7 of the previous day; the 81-day average of the
day; and the Ap vector of the model's switch 9 = -1 mode: the daily Ap, the 3-hourly ap of the
current 3-hour interval and of the three before it, and the means of the eight intervals 12-33 h
and 36-57 h before the current one.

**Reference:** Vallado, D. A., Kelso, T. S., "Earth orientation parameter and space weather data for
flight operations", AAS 13-373, 2013 (the CelesTrak files); Picone et al. 2002 (the model's inputs).
"""

import datetime
from pathlib import Path

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import ArrayLike, Float


_DAY = 86400.0  # [s]
# Days before the first day of a run that the Ap history needs (57 h, rounded up to whole days).
HISTORY_DAYS = 3


def _day_number(cls: str, arg: str, value) -> tuple[int, float]:
    """(UTC day number since 1970-01-01, seconds of the day) of an Epoch, ISO string or datetime."""
    if hasattr(value, "iso") and hasattr(value, "jd_utc"):
        value = value.iso
    if isinstance(value, datetime.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(datetime.UTC).replace(tzinfo=None)
        value = value.isoformat()
    if isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
        value = value.isoformat()
    if not isinstance(value, str):
        raise TypeError(
            f"{cls}: `{arg}` must be an Epoch, an ISO 8601 UTC string or a datetime; got {value!r}."
        )
    text = value.strip().removesuffix("Z")
    try:
        instant = np.datetime64(text, "us")
    except ValueError as err:
        raise ValueError(f"{cls}: `{arg}` is not an ISO 8601 date; got {value!r}.") from err
    day = instant.astype("datetime64[D]")
    seconds = (instant - day.astype("datetime64[us]")).astype(np.int64) / 1e6
    return int(day.astype(np.int64)), float(seconds)


def _iso_day(day: int) -> str:
    return str(np.datetime64(int(day), "D"))


class SpaceWeather(eqx.Module):
    r"""Daily F10.7, its 81-day average and the 3-hourly Ap over a span of days (see the module docs).

    Build it with `SpaceWeather.from_csv(path, start, end)` (a CelesTrak `SW-All.csv`-format file,
    the days `start` to `end` plus the history the model needs) or `SpaceWeather.constant(f107,
    f107a, ap)` (the same values at every instant, for studies).

    **Methods:** `indices(day, sec)` gives `(f107, f107a, ap)` (ap of shape (7,)) at the UTC day
    number `day` (days since 1970-01-01) and second `sec` of the day (traceable);
    `span()` the first and last covered instants as `(day, sec)` pairs; `first_day`/`last_day` (ISO).

    **Assumptions and limitations:** the file's values are used as they stand (observed,
    predicted or monthly-predicted rows alike; rows without Ap values are refused inside the span);
    F10.7 is the previous day's whatever the hour (the model's convention).
    """

    day0: int = eqx.field(static=True)  # day number of the arrays' first day
    n_days: int = eqx.field(static=True)
    source: str = eqx.field(static=True)
    f107_obs: jnp.ndarray  # (n_days,) [sfu]
    f107a: jnp.ndarray  # (n_days,) [sfu]
    ap_daily: jnp.ndarray  # (n_days,)
    ap_3h: jnp.ndarray  # (8 n_days,)

    def __init__(
        self,
        day0: int,
        f107_obs: Float[ArrayLike, " n"],
        f107a: Float[ArrayLike, " n"],
        ap_daily: Float[ArrayLike, " n"],
        ap_3h: Float[ArrayLike, " m"],
        source: str,
    ):
        cls = "SpaceWeather"
        arrays = [np.asarray(a, dtype=float) for a in (f107_obs, f107a, ap_daily, ap_3h)]
        n = arrays[0].shape[0]
        shapes = [(n,), (n,), (n,), (8 * n,)]
        for name, a, shape in zip(("f107_obs", "f107a", "ap_daily", "ap_3h"), arrays, shapes):
            if a.shape != shape:
                raise ValueError(f"{cls}: `{name}` must have shape {shape}; got {a.shape}.")
            bad = ~np.isfinite(a) | (a < 0.0)
            if bad.any():
                raise ValueError(
                    f"{cls}: `{name}` must be finite and >= 0; got {a[bad][0]!r} (index "
                    f"{int(np.argmax(bad))})."
                )
        self.day0 = int(day0)
        self.n_days = int(n)
        self.source = str(source)
        self.f107_obs, self.f107a, self.ap_daily, self.ap_3h = (jnp.asarray(a) for a in arrays)

    @classmethod
    def constant(cls, f107: float = 150.0, f107a: float | None = None, ap: float = 4.0):
        """The same F10.7 [sfu], 81-day average (default `f107`) and Ap (daily and every 3-hourly
        value) at every instant."""
        f107a = f107 if f107a is None else f107a
        for name, v in (("f107", f107), ("f107a", f107a), ("ap", ap)):
            if not (isinstance(v, (int, float)) and np.isfinite(v) and v >= 0.0):
                raise ValueError(
                    f"SpaceWeather.constant: `{name}` must be a number >= 0; got {v!r}."
                )
        return cls(0, [f107], [f107a], [ap], [ap] * 8, source="constant")

    @property
    def is_constant(self) -> bool:
        return self.source == "constant"

    @classmethod
    def from_csv(cls, path, start, end=None):
        """The days `start` to `end` (Epochs, ISO 8601 UTC strings or datetimes; `end` default
        `start`) of a CelesTrak `SW-All.csv`-format file, with the 3 days before `start` that the
        Ap history needs (the span then ends at 24:00 of `end`'s day). Errors name the date and the file's span."""
        name = "SpaceWeather.from_csv"
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"{name}: no space-weather file at {str(path)!r}.")
        d_start, _ = _day_number(name, "start", start)
        d_end, _ = _day_number(name, "end", start if end is None else end)
        if d_end < d_start:
            raise ValueError(
                f"{name}: `end` ({_iso_day(d_end)}) must not be before `start` ({_iso_day(d_start)})."
            )
        with path.open(newline="") as fh:
            header = fh.readline().strip().split(",")
            need = ["DATE", *[f"AP{i}" for i in range(1, 9)], "AP_AVG", "F10.7_OBS",
                    "F10.7_OBS_CENTER81"]  # fmt: skip
            missing = [c for c in need if c not in header]
            if missing:
                raise ValueError(
                    f"{name}: {str(path)!r} is not in CelesTrak's SW-All.csv format: no columns "
                    f"{missing}."
                )
            col = {c: header.index(c) for c in need}
            rows = [line.rstrip("\r\n").split(",") for line in fh if line.strip()]
        days = np.array([np.datetime64(r[col["DATE"]], "D").astype(np.int64) for r in rows])
        if days.size == 0:
            raise ValueError(f"{name}: {str(path)!r} has no data rows.")
        file_span = f"{_iso_day(days[0])} to {_iso_day(days[-1])}"
        lo, hi = d_start - HISTORY_DAYS, d_end
        for day, what in ((lo, "the 3 days of Ap history before `start`"), (hi, "`end`")):
            if day < days[0] or day > days[-1]:
                raise ValueError(
                    f"{name}: {_iso_day(day)} ({what}) is outside the file's span {file_span} "
                    f"({str(path)!r})."
                )
        index = {int(d): i for i, d in enumerate(days)}
        sel = []
        for day in range(lo, hi + 1):
            if day not in index:
                raise ValueError(f"{name}: {_iso_day(day)} is missing from {str(path)!r}.")
            sel.append(rows[index[day]])

        def column(c, day_rows, first_day):
            out = []
            for k, r in enumerate(day_rows):
                text = r[col[c]].strip() if col[c] < len(r) else ""
                if text == "":
                    raise ValueError(
                        f"{name}: {_iso_day(first_day + k)} has no `{c}` value in {str(path)!r} "
                        f"(file span {file_span})."
                    )
                out.append(float(text))
            return np.array(out)

        ap3 = np.stack([column(f"AP{i}", sel, lo) for i in range(1, 9)], axis=1).ravel()
        return cls(
            lo,
            column("F10.7_OBS", sel, lo),
            column("F10.7_OBS_CENTER81", sel, lo),
            column("AP_AVG", sel, lo),
            ap3,
            source=str(path),
        )

    def span(self) -> tuple[tuple[int, float], tuple[int, float]]:
        """First and last instants `(day, sec)` at which `indices` has all its inputs."""
        if self.is_constant:
            return (-(2**62), 0.0), (2**62, 0.0)
        return (self.day0 + HISTORY_DAYS, 0.0), (self.day0 + self.n_days - 1, _DAY)

    @property
    def first_day(self) -> str:
        return "any" if self.is_constant else _iso_day(self.span()[0][0])

    @property
    def last_day(self) -> str:
        return "any" if self.is_constant else _iso_day(self.span()[1][0])

    def covers(self, day, sec):
        """Whether the instant (UTC day number, seconds of the day) is inside `span()` (traceable)."""
        if self.is_constant:
            return jnp.asarray(True)
        (d0, _), (d1, s1) = self.span()
        t = (day - d0) * _DAY + sec
        return (t >= 0.0) & (t <= (d1 - d0) * _DAY + s1)

    def indices(self, day, sec):
        """`(f107, f107a, ap)` at UTC day number `day` and `sec` seconds of the day (traceable;
        indices are clamped to the arrays: check `covers` for the span)."""
        if self.is_constant:
            return self.f107_obs[0], self.f107a[0], jnp.full(7, self.ap_daily[0])
        i = jnp.clip(jnp.asarray(day, dtype=int) - self.day0, 1, self.n_days - 1)
        k = 8 * i + jnp.clip(jnp.floor(jnp.asarray(sec, dtype=float) / 10800.0), 0, 7).astype(int)
        k = jnp.clip(k, 19, 8 * self.n_days - 1)
        a = self.ap_3h
        recent = a[k - jnp.arange(4)]
        mean_12_33 = jnp.mean(a[k - 4 - jnp.arange(8)])
        mean_36_57 = jnp.mean(a[k - 12 - jnp.arange(8)])
        ap = jnp.concatenate([self.ap_daily[i][None], recent, jnp.stack([mean_12_33, mean_36_57])])
        return self.f107_obs[i - 1], self.f107a[i], ap

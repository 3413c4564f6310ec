"""Nothing a user gave is lost (issue 47, deliverable 3): every writer of the project refuses an
existing output unless its explicit flag is given (`--overwrite`, `overwrite=True`), writes under a
temporary name and moves only a complete output into place, so a failed run or write leaves the
earlier output as it was.

Writers: `python -m effectors.run` (Zarr and netCDF), `jaxsim.results.to_zarr`,
`effectors.save_setup`, `effectors.write_vizard`, `jaxsim.animation.save_animation`, the demo's
figure (`jaxsim-demo --out`), `run_campaign` (a folder of the user's files).

Oracles: the bytes of every file of the earlier output (a snapshot) before and after; no
temporary file left next to the output; the exit status and the message naming the path and
the flag.
"""

import json

import numpy as np
import pytest

import effectors as fx
import jaxsim as js
from effectors import run as cli


I_HUB = np.diag([10.0, 20.0, 30.0])  # [kg m^2]


def _sc():
    return fx.Spacecraft(fx.Hub(100.0, I_HUB), name="craft")


def _y0(sc):
    return sc.init_state(omega_BN_B=[0.01, -0.02, 0.03])


def snapshot(path):
    """`{relative path: bytes}` of a file or of every file under a folder."""
    if path.is_file():
        return {".": path.read_bytes()}
    return {
        str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()
    }


def leftovers(folder, keep):
    """Entries of `folder` other than `keep`: temporary files of a writer."""
    return sorted(p.name for p in folder.iterdir() if p.name not in keep)


def _user_folder(tmp_path, name="results.zarr"):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "thesis.tex").write_text("three years of work")
    return folder


# --------------------------------------------------------------------------------------------------
# python -m effectors.run


@pytest.fixture
def setup_file(tmp_path):
    sc = _sc()
    path = tmp_path / "setup.json"
    fx.save_setup(path, sc, _y0(sc), t1=0.4, dt=0.1, sample_dt=0.2)
    return path


def test_cli_refuses_an_existing_output_folder(setup_file, tmp_path, capsys):
    """`-o EXISTING_FOLDER` deleted the folder's contents and exited 0; now exit 2 before
    running, the folder untouched."""
    pytest.importorskip("zarr")
    folder = _user_folder(tmp_path)
    before = snapshot(folder)
    assert cli.main([str(setup_file), "-o", str(folder)]) == 2
    err = capsys.readouterr().err
    assert f"the folder {str(folder)!r} exists; nothing was written (give --overwrite" in err
    assert snapshot(folder) == before
    # The default output next to the setup, too.
    default = tmp_path / "setup.zarr"
    default.mkdir()
    assert cli.main([str(setup_file)]) == 2
    assert list(default.iterdir()) == []


def test_cli_overwrite_replaces_and_a_failed_run_keeps_the_earlier_output(setup_file, tmp_path):
    xr = pytest.importorskip("xarray")
    pytest.importorskip("zarr")
    out = tmp_path / "out.zarr"
    assert cli.main([str(setup_file), "-o", str(out)]) == 0
    first = snapshot(out)
    assert cli.main([str(setup_file), "-o", str(out), "--overwrite"]) == 0
    ds = xr.open_zarr(out, consolidated=False)
    assert ds["omega_BN_B"].shape == (3, 3)
    # A run that fails (fixed-step solver without `dt`) with --overwrite: exit 1, output kept.
    data = json.loads(setup_file.read_text())
    del data["simulate"]["dt"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    assert cli.main([str(bad), "-o", str(out), "--overwrite"]) == 1
    assert snapshot(out) == first
    assert leftovers(tmp_path, {"setup.json", "bad.json", "out.zarr"}) == []


def test_cli_netcdf_output_is_refused_then_replaced(setup_file, tmp_path, capsys):
    pytest.importorskip("scipy")
    pytest.importorskip("xarray")
    out = tmp_path / "run.nc"
    out.write_bytes(b"user data")
    assert cli.main([str(setup_file), "-o", str(out)]) == 2
    assert out.read_bytes() == b"user data"
    assert "the file" in capsys.readouterr().err
    assert cli.main([str(setup_file), "-o", str(out), "--overwrite"]) == 0
    assert out.read_bytes()[:3] == b"CDF"
    assert leftovers(tmp_path, {"setup.json", "run.nc"}) == []


# --------------------------------------------------------------------------------------------------
# jaxsim.results.to_zarr


def test_to_zarr_refuses_replaces_and_keeps_on_failure(tmp_path, monkeypatch):
    xr = pytest.importorskip("xarray")
    pytest.importorskip("zarr")
    sc = _sc()
    sol = js.simulate(sc, _y0(sc), 0.4, dt=0.1, sample_dt=0.2)
    folder = _user_folder(tmp_path, "run.zarr")
    before = snapshot(folder)
    with pytest.raises(FileExistsError, match="to_zarr: the folder .*run.zarr' exists; nothing"):
        js.results.to_zarr(sol, folder)
    assert snapshot(folder) == before
    js.results.to_zarr(sol, folder, overwrite=True)
    assert not (folder / "thesis.tex").exists()
    written = snapshot(folder)

    def broken(self, store, **kwargs):  # writes part of a store, then fails
        (store / "zarr.json").parent.mkdir(parents=True, exist_ok=True)
        (store / "zarr.json").write_text("{")
        raise OSError("disk full")

    monkeypatch.setattr(xr.Dataset, "to_zarr", broken)
    with pytest.raises(OSError, match="disk full"):
        js.results.to_zarr(sol, folder, overwrite=True)
    assert snapshot(folder) == written
    assert leftovers(tmp_path, {"run.zarr"}) == []


# --------------------------------------------------------------------------------------------------
# effectors.save_setup


def test_save_setup_refuses_replaces_and_keeps_on_failure(tmp_path):
    sc = _sc()
    path = tmp_path / "mine.json"
    path.write_text("my notes")
    with pytest.raises(FileExistsError, match="save_setup: the file .*mine.json' exists"):
        fx.save_setup(path, sc, t1=1.0, dt=0.1)
    assert path.read_text() == "my notes"
    fx.save_setup(path, sc, t1=1.0, dt=0.1, overwrite=True)
    written = path.read_text()
    assert fx.load_setup(path).settings["t1"] == 1.0
    with pytest.raises(TypeError, match="not declarative"):
        fx.save_setup(path, sc, t1=1.0, dt=0.1, overwrite=True, events=(lambda t, y, a: t,))
    assert path.read_text() == written
    with pytest.raises(ValueError, match="`overwrite` must be True or False; got 'yes'"):
        fx.save_setup(path, sc, t1=1.0, dt=0.1, overwrite="yes")
    assert leftovers(tmp_path, {"mine.json"}) == []


# --------------------------------------------------------------------------------------------------
# effectors.write_vizard


def test_write_vizard_refuses_before_computing_and_replaces(tmp_path, monkeypatch):
    pytest.importorskip("google.protobuf")
    import effectors.vizard as viz

    sc = _sc()
    sol = js.simulate(sc, _y0(sc), 0.4, dt=0.1, sample_dt=0.2)
    path = tmp_path / "run.bin"
    path.write_bytes(b"earlier")
    with pytest.raises(FileExistsError, match="write_vizard: the file .*run.bin' exists"):
        fx.write_vizard(path, sol, sc)
    assert path.read_bytes() == b"earlier"
    fx.write_vizard(path, sol, sc, overwrite=True)
    written = path.read_bytes()
    assert len(fx.read_vizard(path)) == 3

    def broken(n):
        raise RuntimeError("interrupted")

    monkeypatch.setattr(viz, "_varint", broken)
    with pytest.raises(RuntimeError, match="interrupted"):
        fx.write_vizard(path, sol, sc, overwrite=True)
    assert path.read_bytes() == written
    assert leftovers(tmp_path, {"run.bin"}) == []


# --------------------------------------------------------------------------------------------------
# jaxsim.animation.save_animation


def test_save_animation_refuses_and_keeps_on_failure(tmp_path):
    pytest.importorskip("matplotlib")
    pytest.importorskip("PIL")
    import matplotlib.pyplot as plt

    ts = np.linspace(0.0, 1.0, 3)
    rod = np.stack([np.zeros((3, 3)), np.ones((3, 3))], axis=1)
    anim = js.animation.animate_scene(ts, [js.animation.Polyline(rod)], fps=5, figsize=(1, 1))
    path = tmp_path / "scene.gif"
    path.write_bytes(b"earlier")
    try:
        with pytest.raises(FileExistsError, match="save_animation: the file .*scene.gif' exists"):
            js.animation.save_animation(anim, path, dpi=20)
        assert path.read_bytes() == b"earlier"
        draw = anim._func

        def interrupted(i):  # fails while writing, after the first frame
            if i > 0:
                raise RuntimeError("interrupted")
            return draw(i)

        anim._func = interrupted
        with pytest.raises(RuntimeError, match="interrupted"):
            js.animation.save_animation(anim, path, dpi=20, overwrite=True)
        assert path.read_bytes() == b"earlier"
        anim._func = draw
        js.animation.save_animation(anim, path, dpi=20, overwrite=True)
        assert path.read_bytes()[:3] == b"GIF"
    finally:
        plt.close("all")
    assert leftovers(tmp_path, {"scene.gif"}) == []


# --------------------------------------------------------------------------------------------------
# jaxsim-demo --out


def test_demo_refuses_an_existing_figure_before_running(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    from _jaxsim_cli import demo

    path = tmp_path / "figure.png"
    path.write_bytes(b"my figure")
    assert demo(["--out", str(path)]) == 2
    assert "jaxsim-demo: the file" in capsys.readouterr().err
    assert path.read_bytes() == b"my figure"


# --------------------------------------------------------------------------------------------------
# run_campaign


def test_campaign_is_never_written_among_a_users_files(tmp_path):
    pytest.importorskip("zarr")
    import jax.random as jr

    from jaxsim import montecarlo as mc
    from tests._sharding_worker import DISPERSIONS

    folder = _user_folder(tmp_path, "mine")
    before = snapshot(folder)
    with pytest.raises(ValueError, match=r"is not a campaign \(no manifest.json\) and holds other "
                       r"files \(thesis.tex\); nothing was written"):  # fmt: skip
        mc.run_campaign(lambda p: {"v": p["a"]}, DISPERSIONS, folder, key=jr.key(0), n=2,
                        chunk_size=2)  # fmt: skip
    assert snapshot(folder) == before
    # A store named like a campaign's that is not one is not replaced either.
    other = tmp_path / "other"
    (other / "campaign.zarr").mkdir(parents=True)
    (other / "campaign.zarr" / "zarr.json").write_text('{"attributes": {"format": "mine"}}')
    before = snapshot(other)
    with pytest.raises(ValueError, match="not a jaxsim campaign store"):
        mc.run_campaign(lambda p: {"v": p["a"]}, DISPERSIONS, other, key=jr.key(0), n=2,
                        chunk_size=2)  # fmt: skip
    assert snapshot(other) == before

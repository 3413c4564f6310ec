"""The driver stage: one compiled program per run, chosen by the route from the request.

`_plain` (no clocks, events, discontinuities or noise), `_sde` (noise), `_clocked` (clocks,
flight software, zero-crossing events, scheduled discontinuities, `dtmax`), `_free_time` (a traced
horizon), `_progress` (progress bars of long runs). Drivers step through the cores.
"""

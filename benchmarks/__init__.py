"""Benchmarks and Basilisk cross-validation tools (not part of the installed jaxsim package).

Benchmarks measure cold compiles (`compile_s` is the first call minus a warm one): JAX's
persistent cache, which jaxsim turns on only on request (`jaxsim.enable_cache`), stays off in
their processes unless `JAXSIM_CACHE` is set (`benchmarks/bench_restart.py` measures the cache).
"""

import os


os.environ.setdefault("JAXSIM_CACHE", "0")

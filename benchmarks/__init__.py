"""Benchmarks and Basilisk cross-validation tools (not part of the installed jaxsim package).

Benchmarks measure cold compiles (`compile_s` is the first call minus a warm one): jaxsim's cache
(`jaxsim._cache`), which a restart loads programs from, is off in their processes unless
`JAXSIM_CACHE` is set (`benchmarks/bench_restart.py` measures the cache itself).
"""

import os


os.environ.setdefault("JAXSIM_CACHE", "0")

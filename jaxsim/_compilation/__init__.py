"""The compilation stage: how jaxsim's programs are compiled and kept.

`_jit` (`jaxsim.jit` and the compile options of jaxsim's entry points), `_xla_options` (XLA:CPU's
small-loop setting), `_cache` (JAX's persistent compilation cache for jaxsim's programs).
"""

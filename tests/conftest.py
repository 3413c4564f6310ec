import os


# JAX's persistent cache is opt-in (`jaxsim.enable_cache`, `JAXSIM_CACHE`): the tests run without
# it, whatever the environment says; the tests of the cache turn it on in their own folders.
os.environ.pop("JAXSIM_CACHE", None)

import jax  # noqa: E402


jax.config.update("jax_enable_x64", True)

import os


# JAX's persistent cache is opt-in (`jaxsim.enable_cache`, `JAXSIM_CACHE`): the tests run without
# it, whatever the environment says; the tests of the cache turn it on in their own folders.
os.environ.pop("JAXSIM_CACHE", None)

import jax  # noqa: E402


jax.config.update("jax_enable_x64", True)

import pytest  # noqa: E402

from tests.helpers import compile_log  # noqa: E402


@pytest.fixture
def compilations():
    """The names of the functions XLA compiles while the test runs (`tests.helpers.compile_log`)."""
    with compile_log() as names:
        yield names

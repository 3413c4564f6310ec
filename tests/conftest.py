import os


# JAX's persistent cache is opt-in (`jaxsim.enable_cache`, `JAXSIM_CACHE`): the tests run without
# it, whatever the environment says; the tests of the cache turn it on in their own folders.
os.environ.pop("JAXSIM_CACHE", None)

import jax  # noqa: E402


jax.config.update("jax_enable_x64", True)

import pytest  # noqa: E402

from tests.helpers import compile_log  # noqa: E402


@pytest.fixture
def fresh_programs():
    """Start the test with no compiled program in the process (`jax.clear_caches()`).

    A test that counts compiles must not depend on what ran before it in the worker: each
    jitted function of jaxsim holds at most `MAX_PROGRAMS` programs and drops them all at one
    more (`jaxsim._compilation._jit`), so programs left by earlier tests could make a count one
    higher (the free-time test counted 7 compiles instead of 6 after other files). Later tests
    only compile again what they use."""
    jax.clear_caches()


@pytest.fixture
def compilations(fresh_programs):
    """The names of the functions XLA compiles while the test runs (`tests.helpers.compile_log`),
    from a process without compiled programs (`fresh_programs`)."""
    with compile_log() as names:
        yield names


def pytest_addoption(parser):
    parser.addoption(
        "--reverse-files",
        action="store_true",
        help="run the test files in reverse order (each file's tests in their order): checks "
        "that no test depends on what ran before it in the process",
    )


def pytest_collection_modifyitems(config, items):
    if not config.getoption("--reverse-files"):
        return
    files = list(dict.fromkeys(item.path for item in items))
    rank = {path: i for i, path in enumerate(reversed(files))}
    items.sort(key=lambda item: rank[item.path])  # stable: keeps each file's order

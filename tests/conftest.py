import atexit
import os
import shutil
import tempfile


# jaxsim's cache (`jaxsim._cache`) goes to a temporary folder of this test process, never to the
# user's cache directory; set before jaxsim is imported. The tests of the cache set their own.
_CACHE = tempfile.mkdtemp(prefix="jaxsim-test-cache-")
os.environ["JAXSIM_CACHE_DIR"] = _CACHE
atexit.register(shutil.rmtree, _CACHE, ignore_errors=True)

import jax  # noqa: E402


jax.config.update("jax_enable_x64", True)

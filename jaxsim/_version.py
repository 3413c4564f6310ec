"""The one version string of the distribution `jaxsim-spacecraft` (read by the build backend,
re-exported as `jaxsim.__version__`, recorded in run metadata by `jaxsim._result._schema`)."""

__version__ = "0.1.0"

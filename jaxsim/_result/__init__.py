"""The result stage: what every driver program ends in and returns.

`_solution` (`Solution` and `finish`, the one result tail), `_codes` (the result codes,
`jaxsim.RESULTS`), `_host_checks` (`throw=True` raised on the host, outside the program),
`_validity` (physical validity checked in the program), `_schema` (the one data schema of runs,
batches and campaigns).
"""

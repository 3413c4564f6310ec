"""The request stage: every argument of `simulate` checked once, in one place, into a frozen `Request`.

After the entrance (`jaxsim._simulate`), the request is the only source of checked values: the
route, the drivers and the run's metadata read it. Modules: `_build` (`build_request`, the
`Request`), `_vocabulary` (diffrax's spellings of the arguments).
"""

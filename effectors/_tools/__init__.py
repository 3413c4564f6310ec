"""Tools around the physics: saved setups (declarative JSON files, validated on load). The public
tools (`effectors.run`, `demo`, `plotting`, `animation`, `vizard`) are modules of the package.
"""

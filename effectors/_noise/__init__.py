"""Noise states driven by Wiener increments: geometric Brownian motion and mean-reverting
(Ornstein-Uhlenbeck) processes.
"""

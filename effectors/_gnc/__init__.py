"""Guidance, navigation and control library: attitude guidance modes and the tracking error
(Basilisk `inertial3D`, `hillPoint`, `velocityPoint`, `sunSafePoint`, `locationPointing`,
`attTrackingError`), and sensors as discrete models on clocks.
"""

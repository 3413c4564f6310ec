"""The event stage: zero-crossing events and their location.

`_event` (the `Event` type a user builds), `_guard` (crossing detection inside every step, so that
no crossing tunnels between step ends), `_roots` (root finders for event times).
"""

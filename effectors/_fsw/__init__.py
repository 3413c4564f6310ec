"""Flight software: discrete models on clocks (navigation, attitude error, MRP feedback, wheel torque
mapping).
"""

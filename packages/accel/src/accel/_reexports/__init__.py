"""The tables of which module provides each public name and each of the reference's module paths, and the switch that serves ``accelerate`` imports from accel."""

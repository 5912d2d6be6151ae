"""The launcher backends of ``accel launch``: the base class, one module per backend, and the
registry that chooses one for a launch."""

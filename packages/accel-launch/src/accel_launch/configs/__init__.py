"""The config file of ``accel config`` and ``accel launch``: its model, sections, bounds,
values, comments, and the files of the reference and of older formats it reads."""

"""The error every command reports as ``accel <command>: error: ...`` with exit code 2."""


class ConfigError(ValueError):
    """A setting that cannot be used, with the rule, the actual value and the fix."""

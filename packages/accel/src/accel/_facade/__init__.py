"""The ``Accelerator`` class and its groups of methods, the registry of prepared objects and the wrappers ``prepare`` puts around them."""

"""Big-model inference: empty-weight init, device maps, offload hooks and streaming safetensors loading. Depends only on torch and safetensors."""

from importlib.metadata import version as _version

__version__ = _version("accel-bigmodel")

__all__ = ["__version__"]

"""Putting weights into a model: streaming a checkpoint in, loading safetensors into existing
tensors, preparing state dicts for saving, and dispatching a model over devices, CPU and disk.
"""

"""Hooks around a module's ``forward`` and its construction: attaching and removing hooks, aligning
inputs and weights on the execution device, prefetching offloaded weights, layer-wise casting,
access to offloaded weights and empty-weight initialisation.
"""

"""Weights kept on disk: the offload storage protocol and its registry, the built-in storage
layouts, the offload index and loader, the read side of the prefetcher and page-locked staging
onto an accelerator.
"""

"""The FSDP engine: wrapping and sharding a model, its communication hooks, its checkpoint
files (sharded and full state dicts), and context parallelism over its device mesh."""

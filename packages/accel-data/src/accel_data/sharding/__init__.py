"""How the data is split between processes: the samplers that hand each process its batches,
the shard of an iterable dataset, the processes of a device mesh that read the same batches,
and the slicing, concatenation and broadcasts of nested batches."""

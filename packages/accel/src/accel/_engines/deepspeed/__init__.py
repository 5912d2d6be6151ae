"""The DeepSpeed engine: its configuration, the placeholder optimizer and scheduler it fills
in, its checkpoint folders, and Ulysses sequence parallelism."""

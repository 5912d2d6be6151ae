"""The Megatron-LM engine: building its model, optimizer and scheduler, and its training and
evaluation steps."""

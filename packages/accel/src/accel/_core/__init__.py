"""What the facade's folders share, below all of them: the registry of prepared objects, the
optimizer and scheduler wrappers, unwrapping a model from its parallel and compiled wrappers,
the probes that tell what kind of model it is, the optimizer step of an XLA replica, and the
readers and writers of a checkpoint's state files. The engines, the checkpoints and the
Accelerator import from here; nothing here imports them."""

"""The plugins and configuration dataclasses: DeepSpeed, FSDP, Megatron-LM, N-D parallelism, the kwargs handlers, and the settings the launcher, the facade and the engines share."""

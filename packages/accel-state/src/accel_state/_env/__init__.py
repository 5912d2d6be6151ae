"""The launcher-to-process contract's machinery: how a variable is declared and read, its FSDP, Megatron-LM and parallelism parts, reading the launcher's environment, and the helpers around it."""

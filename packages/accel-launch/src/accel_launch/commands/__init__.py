"""The subcommands of ``accel`` other than ``launch`` and ``config`` (env, estimate-memory,
merge-weights, to-fsdp2, tpu-config, install-command), SageMaker, notebooks, and the
reference CLI's Python entry points."""

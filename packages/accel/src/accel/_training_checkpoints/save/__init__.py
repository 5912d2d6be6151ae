"""Writing a checkpoint, stage by stage: the pipeline (plan, stage, write, commit, rotate), the
staging folder, the snapshot of every state, and the host copies of an asynchronous save."""

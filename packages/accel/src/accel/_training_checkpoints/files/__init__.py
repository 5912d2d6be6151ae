"""A checkpoint folder on disk: its manifest and checksums, naming and rotating folders, the
writer's lock, the meeting of every process, the reference library's layout, and the parts of
a run a checkpoint holds."""

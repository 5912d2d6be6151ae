"""Reading a checkpoint back: checking the folder against its manifest, then restoring every
state, all or nothing, and checking optimizer and scheduler values against the run."""

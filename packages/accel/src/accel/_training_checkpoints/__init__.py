"""Training checkpoints: what ``save_state`` writes and ``load_state`` reads, their folders, manifest, rendezvous and background writes, and the reference's functional checkpoint API."""

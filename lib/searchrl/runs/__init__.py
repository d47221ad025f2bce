"""Run folders: their layout and status, one live owner, provenance, training history, checkpoints and resume
state, the kernel watch under plain papermill, memory use and slim copies."""

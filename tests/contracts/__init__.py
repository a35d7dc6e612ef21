"""One contract suite per boundary, run over every implementation of it (fake, replay, real)."""

"""State-space (Mamba) mixers for the one decoder (core/transformer/block.py builds their layers)."""

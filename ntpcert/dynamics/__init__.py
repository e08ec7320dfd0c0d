"""The dynamics layer: optimisers, trajectories compared with the limits, the regularisation path."""

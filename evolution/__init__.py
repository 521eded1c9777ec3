"""Evolution strategies: EGGROLL, fitness shaping, ternary packing, gossip, coordinator."""

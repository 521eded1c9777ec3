"""Evolution strategies: integer EGGROLL (the EGG model) and float EGGROLL (the MinGRU LM), fitness
shaping and ternary packing, and their training runs. Gossip tournaments and a coordinator/worker
scheme are planned, not built."""

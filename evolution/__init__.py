"""Evolution strategies: integer EGGROLL (the EGG model and d-eggs' transformer) and float EGGROLL
(the MinGRU LM), fitness shaping and ternary packing, and their training runs, in three ways to use
many ranks: synchronous steps (es_trainer, float_es_trainer), d-eggs' coordinator that hands out
chunks of the population to workers and re-queues a straggler's (coordinator, coordinator_worker,
coordinator_wire, coordinated_trainer), and gruboros' gossip tournaments between islands (gossip,
gossip_run and the other gossip_* modules, egg_island)."""

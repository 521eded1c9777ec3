"""Evolution strategies: integer EGGROLL (the EGG model and d-eggs' transformer) and float EGGROLL
(the MinGRU LM), fitness shaping and ternary packing, and their synchronous training runs
(es_trainer, float_es_trainer); d-eggs' coordinator in coordinator/; the EGG as a gossip island
(egg_island; the tournaments themselves are training/gossip/). Both strategies ask/tell on any fitness:
int_eggroll_search.IntEggrollSearch (int8 parameters) and float_eggroll_search.FloatEggrollSearch
(float32 parameters)."""

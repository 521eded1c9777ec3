"""How far the distributed modes go: scale models of the TCP coordinator (its cost per message, measured)
and of the gossip tournaments (simulated to thousands of islands), and synchronous against coordinator
EGGROLL on N ranks: `python -m bench.scale.<name>`."""

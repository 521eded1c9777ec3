"""The fault suite: runs of a TCP coordinator, of gossip islands and of MPI ranks as processes on this
machine, each case a function that kills, stops, partitions or attacks them and returns what it cost.
tests/faults asserts on the cases; `python -m bench.faults` (__main__.py) tabulates them."""

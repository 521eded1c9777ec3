"""gruboros' gossip tournaments between islands, for every island trainer (training/mingru/island.py,
evolution/egg_island.py, zorn/rge/island.py):

    fields            the gossip flags every island run config shares
    mpi               tournaments over MPI: deadlock-free rounds, the winner's model sent to the loser
    merge             what a loser does with the winner's model: clonal, recombination, mixed
    fitness           an island's fitness: the moving average of its training loss
    population        the population's summary lines and the save draw
    stop              islands agreeing to stop
    checkpoints       the island folders, elite archive and `best` links
    run               a gossip run over MPI (bin/train_gossip.py)
    tcp, tcp_wire     tournaments over TCP between plain processes (ZeroMQ), surviving lost peers
    peers             finding peers: SLURM node list, rendezvous folder, --peers
    file_population   the population's books on disk, with no rank 0
    tcp_run           a gossip run over TCP (--transport tcp)
"""

"""The MPI world: rank, size, node-local rank; works without a launcher as a world of size 1.

Collectives here use buffer-based MPI calls only (no pickled objects cross the network). Where no
MPI library can be loaded at all (a laptop without the mpich wheel), a process that was not started
by a launcher runs as a world of one with `SingleProcessComm`.
"""

import json
import os
import time
from dataclasses import dataclass

import numpy as np

from eggnog.runtime.errors import BadInput

LAUNCHER_SIZE_VARS = ("SLURM_NTASKS", "SLURM_NPROCS", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_SIZE")


def launcher_size(environ=os.environ):
    """How many tasks a launcher says it started (1 when none did)."""
    for var in LAUNCHER_SIZE_VARS:
        if environ.get(var, "").isdigit():
            return int(environ[var])
    return 1


def check_launch(size, environ=os.environ):
    """A launcher that says N tasks but gives a world of 1 means MPI and the PMI do not match."""
    expected = environ.get("SLURM_NTASKS") or environ.get("SLURM_NPROCS")
    if expected and expected.isdigit() and int(expected) > 1 and size == 1:
        raise BadInput(f"SLURM started {expected} tasks but MPI sees a world of size 1, so every task would "
                       "train alone: launch with the PMI your MPI speaks (srun --mpi=pmi2 for MPICH and the "
                       "mpich wheel, srun --mpi=pmix for Open MPI; `srun --mpi=list` shows the choices)")


LAUNCHER_RANK_VARS = ("SLURM_PROCID", "PMI_RANK", "OMPI_COMM_WORLD_RANK")


def launcher_rank(environ=os.environ):
    """The task number a launcher gave a process that does not use MPI (None when none did)."""
    return next((int(environ[v]) for v in LAUNCHER_RANK_VARS if environ.get(v, "").isdigit()), None)


LOCAL_RANK_VARS = ("SLURM_LOCALID", "MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_LOCAL_RANK")
LOCAL_SIZE_VARS = ("MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE", "PMI_LOCAL_SIZE")


def launcher_local(environ=os.environ):
    """(node-local rank, tasks on the node) a launcher gives a task that does not use MPI (0, 1 when none)."""
    rank = next((int(environ[v]) for v in LOCAL_RANK_VARS if environ.get(v, "").isdigit()), 0)
    size = next((int(environ[v]) for v in LOCAL_SIZE_VARS if environ.get(v, "").isdigit()), rank + 1)
    return rank, max(size, rank + 1)


@dataclass
class World:
    comm: object
    rank: int
    size: int
    local_rank: int
    local_size: int

    @property
    def is_root(self):
        return self.rank == 0

    def barrier(self, quiet=False):
        """quiet: poll with sleeps instead of spinning, for ranks that may wait long (MPI
        implementations busy-wait, which starves working ranks on an oversubscribed node)."""
        if not quiet or self.size == 1:
            self.comm.Barrier()
            return
        request = self.comm.Ibarrier()
        while not request.Test():
            time.sleep(0.005)

    def all_true(self, flag):
        """The same verdict on every rank: True only if `flag` holds on all of them."""
        flags = self.allgather_array(np.array([1 if flag else 0], dtype=np.int32))
        return bool(flags.min())

    def bcast_json(self, obj, root=0):
        """Broadcast a JSON-able object from `root` as bytes."""
        data = json.dumps(obj).encode() if self.rank == root else b""
        n = np.array([len(data)], dtype=np.int64)
        self.comm.Bcast(n, root=root)
        buf = np.frombuffer(data, dtype=np.uint8).copy() if self.rank == root else np.empty(n[0], dtype=np.uint8)
        self.comm.Bcast(buf, root=root)
        return json.loads(buf.tobytes().decode())

    def allgather_array(self, local):
        """Concatenate equal-shaped arrays from every rank, in rank order."""
        local = np.ascontiguousarray(local)
        out = np.empty((self.size,) + local.shape, dtype=local.dtype)
        self.comm.Allgather(local, out)
        return out.reshape((self.size * local.shape[0],) + local.shape[1:]) if local.ndim else out

    def allreduce_sum(self, local):
        """Element-wise sum of equal-shaped arrays over all ranks, the same on every rank."""
        local = np.ascontiguousarray(local)
        out = np.empty_like(local)
        self.comm.Allreduce(local, out)
        return out

    def reduce_sum(self, local, root=0):
        """Element-wise sum over all ranks, delivered to `root` (None elsewhere)."""
        local = np.ascontiguousarray(local)
        out = np.empty_like(local) if self.rank == root else None
        self.comm.Reduce(local, out, root=root)
        return out

    def bcast_array(self, array, root=0):
        """`root`'s array (same shape and dtype everywhere) on every rank, in place."""
        self.comm.Bcast(array, root=root)
        return array

    def first_ranks(self, count):
        """A World of ranks 0..count-1 (None on the other ranks); collective over this world."""
        from mpi4py import MPI

        sub = self.comm.Split(0 if self.rank < count else MPI.UNDEFINED, key=self.rank)
        if sub == MPI.COMM_NULL:
            return None
        node = sub.Split_type(MPI.COMM_TYPE_SHARED, key=sub.Get_rank())
        world = World(sub, sub.Get_rank(), sub.Get_size(), node.Get_rank(), node.Get_size())
        node.Free()
        return world

    def alone(self):
        """A World of this process only (MPI.COMM_SELF): for a trainer that must not talk to the other
        ranks, such as a gossip island."""
        if self.size == 1 or isinstance(self.comm, SingleProcessComm):
            return self
        from mpi4py import MPI

        return World(MPI.COMM_SELF, 0, 1, 0, 1)

    def root_first(self, fn):
        """Run fn on rank 0, then on the others (e.g. build a shared cache once)."""
        result = fn() if self.is_root else None
        self.barrier(quiet=True)
        return result if self.is_root else fn()


class SingleProcessComm:
    """The collectives of a world of one process, for machines with no MPI library."""

    def Barrier(self):
        pass

    def Bcast(self, buf, root=0):
        pass

    def Allgather(self, send, recv):
        np.copyto(recv.reshape(np.shape(send)), send)

    def Allreduce(self, send, recv):
        np.copyto(recv, send)

    def Reduce(self, send, recv, root=0):
        np.copyto(recv, send)


_world = None


def world_without_mpi():
    """A world of this process alone that still knows its place on the node (which GPU, how many
    cores): for a process a launcher started that talks over TCP, not MPI."""
    local_rank, local_size = launcher_local()
    return World(SingleProcessComm(), 0, 1, local_rank, local_size)


def init_world():
    """The process's World (MPI initialised on first call)."""
    global _world
    if _world is None:
        try:
            from mpi4py import MPI
        except (ImportError, RuntimeError) as e:  # RuntimeError: mpi4py found no libmpi to load
            if launcher_size() > 1:
                raise BadInput(f"{launcher_size()} tasks were launched but no MPI library could be loaded "
                               f"({str(e).splitlines()[0]}); load the site MPI module") from None
            _world = World(SingleProcessComm(), 0, 1, 0, 1)
            return _world
        comm = MPI.COMM_WORLD
        check_launch(comm.Get_size())
        node = comm.Split_type(MPI.COMM_TYPE_SHARED, key=comm.Get_rank())
        _world = World(comm, comm.Get_rank(), comm.Get_size(), node.Get_rank(), node.Get_size())
        node.Free()
    return _world


def mpi_library():
    """A one-line name of the MPI library in use, or why there is none."""
    if isinstance(_world.comm, SingleProcessComm):
        return "none (single process)"
    from mpi4py import MPI

    return MPI.Get_library_version().splitlines()[0].strip()

"""The MPI world: rank, size, node-local rank; works without a launcher as a world of size 1.

Collectives here use buffer-based MPI calls only (no pickled objects cross the network).
"""

import json
import os
from dataclasses import dataclass

import numpy as np

from kernels.errors import BadInput


def check_launch(size, environ=os.environ):
    """A launcher that says N tasks but gives a world of 1 means MPI and the PMI do not match."""
    expected = environ.get("SLURM_NTASKS") or environ.get("SLURM_NPROCS")
    if expected and expected.isdigit() and int(expected) > 1 and size == 1:
        raise BadInput(f"SLURM started {expected} tasks but MPI sees a world of size 1, so every task would "
                       "train alone: launch with the PMI your MPI speaks (srun --mpi=pmi2 for MPICH and the "
                       "mpich wheel, srun --mpi=pmix for Open MPI; `srun --mpi=list` shows the choices)")


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

    def barrier(self):
        self.comm.Barrier()

    def all_true(self, flag):
        """The same verdict on every rank: True only if `flag` holds on all of them."""
        from mpi4py import MPI

        out = np.zeros(1, dtype=np.int32)
        self.comm.Allreduce(np.array([1 if flag else 0], dtype=np.int32), out, op=MPI.MIN)
        return bool(out[0])

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

    def root_first(self, fn):
        """Run fn on rank 0, then on the others (e.g. build a shared cache once)."""
        result = fn() if self.is_root else None
        self.barrier()
        return result if self.is_root else fn()


_world = None


def init_world():
    """The process's World (MPI initialised on first call)."""
    global _world
    if _world is None:
        from mpi4py import MPI

        comm = MPI.COMM_WORLD
        check_launch(comm.Get_size())
        node = comm.Split_type(MPI.COMM_TYPE_SHARED, key=comm.Get_rank())
        _world = World(comm, comm.Get_rank(), comm.Get_size(), node.Get_rank(), node.Get_size())
        node.Free()
    return _world

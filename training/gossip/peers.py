"""Where the islands of a gossip run over TCP listen, found in one of three ways:
- `--peers slurm`: every host of SLURM_JOB_NODELIST, and on each the ports PORT + L for the node-local
  task ids L of SLURM_TASKS_PER_NODE (the port rule: the island with node-local id L listens on the
  --listen port + L), as gruboros does;
- `--rendezvous DIR`: a folder on a shared filesystem where each island writes its address when it
  starts (island-NN.json, replaced atomically); read again at every boundary, so a restarted island
  on another host or port is found;
- `--peers HOST:PORT,...`: a list.
"""

import json
import os
import re
import socket
from pathlib import Path

from eggnog.runtime.errors import BadInput
from eggnog.runtime.files import write_atomic

BRACKET_RE = re.compile(r"^(?P<prefix>[^\[\]]*)\[(?P<ranges>[^\[\]]+)\](?P<suffix>[^\[\],]*)$")
REGISTRATION_RE = re.compile(r"^island-(\d{2,})\.json$")


def split_top_level(text):
    """Split on the commas that are not inside brackets."""
    parts, depth, current = [], 0, ""
    for ch in text:
        depth += (ch == "[") - (ch == "]")
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    return [p for p in parts + [current] if p]


def expand_nodelist(text):
    """SLURM's compressed host list ("gpu[01-03,07],login5") as host names, in order."""
    hosts = []
    for part in split_top_level(text.strip()):
        match = BRACKET_RE.match(part)
        if match is None:
            if "[" in part or "]" in part:
                raise BadInput(f"cannot read the SLURM node list {text!r}")
            hosts.append(part)
            continue
        for item in match["ranges"].split(","):
            low, _, high = item.partition("-")
            if not low.isdigit() or (high and not high.isdigit()):
                raise BadInput(f"cannot read the SLURM node list {text!r}")
            for n in range(int(low), int(high or low) + 1):
                hosts.append(f"{match['prefix']}{n:0{len(low)}d}{match['suffix']}")
    return hosts


def tasks_per_node(text, nodes):
    """SLURM_TASKS_PER_NODE ("4(x2),3") as one count per node."""
    counts = []
    for item in text.split(","):
        match = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", item.strip())
        if match is None:
            raise BadInput(f"cannot read SLURM_TASKS_PER_NODE {text!r}")
        counts += [int(match[1])] * int(match[2] or 1)
    if len(counts) != nodes:
        raise BadInput(f"SLURM_TASKS_PER_NODE {text!r} names {len(counts)} nodes, the node list {nodes}")
    return counts


def slurm_peers(port, environ=os.environ):
    """Every island's address under the port rule, from SLURM's variables."""
    nodelist = environ.get("SLURM_JOB_NODELIST") or environ.get("SLURM_NODELIST")
    if not nodelist:
        raise BadInput("--peers slurm needs SLURM_JOB_NODELIST: run under srun, or pass --peers HOST:PORT,... or "
                       "--rendezvous DIR")
    hosts = expand_nodelist(nodelist)
    per_node = environ.get("SLURM_TASKS_PER_NODE") or environ.get("SLURM_NTASKS_PER_NODE") or "1"
    counts = (tasks_per_node(per_node, len(hosts)) if "," in per_node or "(" in per_node
              else [int(per_node)] * len(hosts))
    return [f"{host}:{port + local}" for host, count in zip(hosts, counts) for local in range(count)]


def parse_address(text, what):
    host, _, port = text.strip().rpartition(":")
    if not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise BadInput(f"{what} {text!r} is not HOST:PORT")
    return f"{host}:{int(port)}"


def listed_peers(text):
    return [parse_address(item, "peer address") for item in text.split(",") if item.strip()]


def advertised(host, port, environ=os.environ):
    """The address other islands reach this one at: the --listen host, or for 0.0.0.0 this node's name
    as SLURM lists it (else the machine's host name)."""
    if host in ("0.0.0.0", "*", ""):
        host = environ.get("SLURMD_NODENAME") or socket.gethostname()
    return f"{host}:{port}"


class Rendezvous:
    """The shared folder of island addresses."""

    def __init__(self, directory):
        self.directory = Path(directory)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise BadInput(f"cannot create the rendezvous folder {str(directory)!r} ({e.strerror})") from None

    def register(self, island, address):
        record = {"island": island, "address": address, "host": socket.gethostname(), "pid": os.getpid()}
        write_atomic(self.directory / f"island-{island:02d}.json", json.dumps(record).encode())

    def addresses(self):
        """{island: address} of every registration readable now."""
        found = {}
        for path in self.directory.iterdir():
            match = REGISTRATION_RE.match(path.name)
            if match is None:
                continue
            try:
                found[int(match[1])] = str(json.loads(path.read_text())["address"])
            except (OSError, ValueError, KeyError, TypeError):
                continue  # being replaced or damaged: read again at the next boundary
        return found


class PeerBook:
    """The addresses this island gossips with: a fixed list (SLURM or --peers) or the rendezvous
    folder's, less its own."""

    def __init__(self, own, fixed=None, rendezvous=None):
        self.own, self.fixed, self.rendezvous = own, fixed, rendezvous

    def addresses(self):
        found = set(self.fixed or []) | (set(self.rendezvous.addresses().values()) if self.rendezvous else set())
        return sorted(found - {self.own})

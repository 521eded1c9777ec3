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
from eggnog.training.gossip.messages import MAX_ISLANDS
from eggnog.training.gossip.messages import parse_address as address_or_none

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
    """The shared folder of island addresses. A registration whose island number is not its file's or
    not below MAX_ISLANDS, or whose address is not HOST:PORT, is ignored, with one call of warn(**record)
    per version of the file."""

    def __init__(self, directory, warn=None):
        self.directory = Path(directory)
        self.warn, self.warned = warn, set()
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
                text = read_small(path)
            except OSError:
                continue  # being replaced: read again at the next boundary
            address, reason = registration(int(match[1]), text)
            if reason is None:
                found[int(match[1])] = address
            elif text and (path.name, text) not in self.warned and self.warn is not None:
                self.warned.add((path.name, text))
                self.warn(file=str(path), reason=reason)
        return found


def read_small(path, limit=4096):
    """A shared file's text, at most `limit` bytes of it."""
    with open(path, "rb") as f:
        return f.read(limit + 1).decode(errors="replace")


def registration(number, text):
    """(address, None) of a rendezvous file's text for island `number`, or (None, why it is refused)."""
    try:
        record = json.loads(text)
    except (ValueError, RecursionError):
        return None, "not JSON (being written, or damaged)"
    if not isinstance(record, dict):
        return None, "not a JSON object"
    island = record.get("island")
    if isinstance(island, bool) or island != number or not 0 <= number < MAX_ISLANDS:
        return None, f"island {str(island)[:20]} in the file of island {number} (0..{MAX_ISLANDS - 1})"
    address = record.get("address")
    if address_or_none(address) != address:
        return None, f"the address {str(address)[:80]!r} is not HOST:PORT"
    return address, None


class PeerBook:
    """The addresses this island gossips with: a fixed list (SLURM or --peers) or the rendezvous
    folder's, less its own."""

    def __init__(self, own, fixed=None, rendezvous=None):
        self.own, self.fixed, self.rendezvous = own, fixed, rendezvous

    def addresses(self):
        found = set(self.fixed or []) | (set(self.rendezvous.addresses().values()) if self.rendezvous else set())
        return sorted(found - {self.own})

    def island_of(self, address):
        """The island registered at `address` in the rendezvous folder (None: not known there)."""
        if self.rendezvous is None:
            return None
        return next((n for n, a in sorted(self.rendezvous.addresses().items()) if a == address), None)

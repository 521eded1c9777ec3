"""Each gossip message kind read by one function that checks every field, after its tag
(training/gossip/tcp_wire.py has the layout). A message that fails a check raises `Refused`, which the
island counts and logs; nothing in a message can raise anything else.

Every record names its run (a random id made by the run's first island), the address it was sent to
(its direction: an island takes only what is addressed to it), the time it was sent (within
CLOCK_SKEW_S of the receiver's clock) and, for a MODEL that answers a SEND_ME, the receiver's fresh
nonce; offers already seen are refused. So a message captured in one run, exchange or direction is
refused in any other."""

import math
import re
from dataclasses import dataclass

import numpy as np

from eggnog.training.gossip import tcp_wire as wire
from eggnog.training.gossip.merge import needs_state

MAX_ISLANDS = 4096  # island numbers 0..4095
MAX_EXCHANGE = 1 << 56  # exchange ids are 7 random bytes
CLOCK_SKEW_S = 60.0  # how far a sender's clock may be from the receiver's
NONCE_RE = re.compile(r"^[0-9a-f]{32}$")
HEX64_RE = re.compile(r"^[0-9a-f]{64}$")
HOST_RE = re.compile(r"^[A-Za-z0-9._\-\[\]:]{1,253}$")
COMMON = ("island", "address", "hash", "version", "run", "to", "time", "fitness")
FIELDS = {wire.OFFER: COMMON + ("merge", "with_state"), wire.SEND_ME: COMMON + ("nonce",),
          wire.MODEL: COMMON + ("echo",)}


class Refused(ValueError):
    """A message refused: the reason, the island it claims to come from (None: unknown), its kind
    ("unreadable" when not even that is known) and whether to answer the sender with a refusal (it runs
    something else, or sent this to an address that is not this island's)."""

    def __init__(self, reason, peer=None, kind="unreadable", answer=False):
        super().__init__(reason)
        self.reason, self.peer, self.kind, self.answer = reason, peer, kind, answer


@dataclass(frozen=True)
class Expected:
    """What this island admits."""

    version: str
    config_hash: str
    run_id: str
    addresses: frozenset  # this island's advertised address (and the run's --peers list)
    merges: tuple  # the merges this run's initiators may ask for
    optimizer_merge: str


def merges_of(gossip_merge):
    return ("clonal", "recombination") if gossip_merge == "mixed" else (gossip_merge,)


def parse_address(text):
    """HOST:PORT, or None when `text` is not one."""
    if not isinstance(text, str):
        return None
    host, _, port = text.rpartition(":")
    if not HOST_RE.match(host) or not port.isdigit() or len(port) > 5 or not 0 < int(port) < 65536:
        return None
    return f"{host}:{int(port)}"


def finite_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def read(body, expected, kinds, now):
    """The wire.Message of `body` with its record checked field by field; Refused when any is wrong.
    kinds: the message kinds this socket takes."""
    try:
        message = wire.decode(body)
    except wire.Malformed as e:
        raise Refused(str(e)) from None
    info, kind = message.info, wire.KINDS[message.kind]
    island = info.get("island")
    peer = island if isinstance(island, int) and not isinstance(island, bool) and 0 <= island < MAX_ISLANDS else None

    def refuse(reason, answer=False):
        raise Refused(f"{'an' if kind == 'offer' else 'a'} {kind} message {reason}", peer, kind, answer)

    # what says the sender runs something else comes first: such a sender is told, and stops asking
    if info.get("version") != expected.version:
        refuse(f"from eggnog {str(info.get('version'))[:40]}, not this island's {expected.version}", answer=True)
    if info.get("hash") != expected.config_hash:
        refuse(f"of another configuration or corpus (hash {str(info.get('hash'))[:12]}, this run's "
               f"{expected.config_hash[:12]})", answer=True)
    if info.get("run") != expected.run_id:
        refuse(f"of another run (id {str(info.get('run'))[:12]}, this run's {expected.run_id[:12]})", answer=True)
    if not isinstance(info.get("to"), str) or info["to"] not in expected.addresses:
        refuse(f"addressed to {str(info.get('to'))[:80]}, not this island (a relay, or a stale address)",
               answer=True)
    if message.kind not in kinds:
        refuse("where it is not expected")
    names = set(info)
    if names != set(FIELDS[message.kind]):
        missing, extra = sorted(set(FIELDS[message.kind]) - names), sorted(names - set(FIELDS[message.kind]))
        refuse(f"with fields missing {missing[:8]} or unknown {[str(x)[:20] for x in extra[:8]]}")
    if peer is None:
        refuse(f"from island {str(island)[:20]}, not a number in 0..{MAX_ISLANDS - 1}")
    if not 0 <= message.exchange < MAX_EXCHANGE:
        refuse(f"of exchange {message.exchange}, outside 0..2^56")
    if parse_address(info["address"]) != info["address"]:
        refuse(f"from the address {str(info['address'])[:80]!r}, not HOST:PORT")
    if not finite_number(info["time"]) or abs(info["time"] - now) > CLOCK_SKEW_S:
        refuse(f"sent at {str(info['time'])[:30]}, not within {CLOCK_SKEW_S:g} s of this island's clock")
    if not finite_number(info["fitness"]):
        refuse(f"with the fitness {str(info['fitness'])[:30]}, not a finite number")
    has_model = message.scalars.size or message.buffer.size
    if message.kind == wire.OFFER:
        if info["merge"] not in expected.merges:
            refuse(f"asking for the merge {str(info['merge'])[:30]!r}, not one of this run's {list(expected.merges)}")
        if info["with_state"] is not needs_state(info["merge"], expected.optimizer_merge):
            refuse(f"whose with_state {str(info['with_state'])[:10]} disagrees with a {info['merge']} merge here")
    elif message.kind == wire.SEND_ME:
        if not isinstance(info["nonce"], str) or not NONCE_RE.match(info["nonce"]):
            refuse("whose nonce is not 32 hex digits")
    else:
        if info["echo"] is not None and (not isinstance(info["echo"], str) or not NONCE_RE.match(info["echo"])):
            refuse("whose echo is neither null nor 32 hex digits")
        if message.scalars.size < 1:
            refuse("without its fitness scalar")
        if not np.isfinite(message.scalars).all() or not np.isfinite(message.buffer).all():
            refuse("holding values that are not finite")
        if message.scalars[0] != info["fitness"]:
            refuse("whose fitness scalar differs from its record's")
    if message.kind != wire.MODEL and has_model:
        refuse("carrying model values")
    return message

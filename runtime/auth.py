"""Who may join a run over TCP: a shared token, the same code, the same configuration.

The token's key (SHA-256 of the token) is the root of the CURVE keys and message tags of
runtime/secure_socket.py: a process without the token cannot finish the encrypted handshake, so it can
neither join nor inject a result, and a message captured in one run, direction or session is refused in
any other. The token itself never crosses the network. `tag`/`tag_matches` are the plain keyed BLAKE2b
tags of a body, for transports that do not bind a run or session."""

import hashlib
import hmac
import json
import os
from dataclasses import asdict
from pathlib import Path

from eggnog.runtime.errors import BadInput

TOKEN_VAR = "EGGNOG_TOKEN"
TAG_BYTES = 32
UNSIGNED = b""  # the tag of a refusal: a peer with a wrong token could not check a real one
# Not part of the configuration a worker must share: where the coordinator listens and reads its
# token, and where each node finds the corpus (its content is compared instead).
LOCAL_FIELDS = ("transport", "listen", "token_file", "data")


def token_key(token_file=None, environ=os.environ, sharers="the coordinator and every worker"):
    """The message key from --token-file or $EGGNOG_TOKEN; BadInput when neither gives a token.
    sharers: who must hold the same token, for the refusal (gossip: "every island of the run")."""
    if token_file:
        try:
            token = Path(token_file).read_text().strip()
        except OSError as e:
            raise BadInput(f"cannot read the token file {str(token_file)!r} ({e.strerror or e})") from None
        if not token:
            raise BadInput(f"the token file {str(token_file)!r} is empty")
    else:
        token = environ.get(TOKEN_VAR, "").strip()
        if not token:
            raise BadInput(f"the TCP transport needs a shared token: pass --token-file PATH or set {TOKEN_VAR}, the "
                           f"same on {sharers}")
    return hashlib.sha256(token.encode()).digest()


def tag(key, body):
    return hashlib.blake2b(bytes(body), key=key, digest_size=TAG_BYTES).digest()


def tag_matches(key, received, body):
    return len(received) == TAG_BYTES and hmac.compare_digest(received, tag(key, body))


def corpus_fingerprint(corpus):
    """Each split's length and recorded SHA-256 (None for a corpus prepared without one)."""
    if corpus is None:
        return None
    splits = corpus.meta.get("splits", {})
    return {name: [len(getattr(corpus, name)), splits.get(name, {}).get("sha256")] for name in ("train", "val")}


def config_hash(cfg, corpus):
    """SHA-256 of what every worker's replica must share: the fields a resumed run must keep (less the
    node-local ones) and the corpus's content."""
    values = asdict(cfg)
    fixed = {k: values[k] for k in type(cfg).fixed_on_resume() if k not in LOCAL_FIELDS}
    model = getattr(cfg, "model_name", type(cfg).__name__)  # gossip configs: the island trainer's class
    text = json.dumps({"model": model, "config": fixed, "corpus": corpus_fingerprint(corpus)},
                      sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()

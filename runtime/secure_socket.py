"""Authenticated ZeroMQ sockets from a shared token: CurveZMQ per connection, a keyed tag per message.

    keys = derive_keys(token_key)                             # both CURVE key pairs, the tag root
    s = server_socket(context, zmq.ROUTER, keys, max_bytes)   # its ZAP handler admits the token's client key only
    c = client_socket(context, zmq.DEALER, keys, max_bytes)   # talks only to a server holding the token
    k = message_key(keys, run_id, "worker>coordinator")       # one run (bytes), one direction
    t = seal(k, session, body); opened(k, session, t, body)   # one connection (session: bytes both ends know)

Traffic is encrypted and authenticated with per-connection session keys; a frame over max_bytes closes
its connection unread; LINGER is 0. Run ids: the coordinator draws one at its first start (kept in
run_dir/run_id); the gossip islands of a run share one. More in docs/internals.md (runtime/secure_socket.py)."""

import hashlib
import hmac
import threading
from dataclasses import dataclass

SEAL_BYTES = 32
_authenticators = {}  # id(context) -> (context, ThreadAuthenticator)
_lock = threading.Lock()


@dataclass(frozen=True)
class CurveKeys:
    server_secret: bytes  # Z85
    server_public: bytes
    client_secret: bytes
    client_public: bytes
    tag_root: bytes  # 32 raw bytes: the root of the message keys


def _derive(token_key, label):
    return hashlib.blake2b(label, key=bytes(token_key), digest_size=32).digest()


def derive_keys(token_key):
    """Both CURVE key pairs and the message-key root from the token's key (32 bytes)."""
    import zmq
    from zmq.utils import z85

    server_secret = z85.encode(_derive(token_key, b"eggnog curve server secret"))
    client_secret = z85.encode(_derive(token_key, b"eggnog curve client secret"))
    return CurveKeys(server_secret, zmq.curve_public(server_secret), client_secret, zmq.curve_public(client_secret),
                     _derive(token_key, b"eggnog message tags"))


class _AllowOne:
    """ZAP credentials: only the client key derived from the token."""

    def __init__(self, client_public):
        self.client_public = bytes(client_public)

    def callback(self, domain, key):
        return hmac.compare_digest(bytes(key), self.client_public)


def _authenticator(context, keys):
    """The context's ZAP handler, started once; configured for this token's domain."""
    from zmq.auth.thread import ThreadAuthenticator

    domain = "eggnog-" + keys.client_public.decode()[:20]
    with _lock:
        held = _authenticators.get(id(context))
        if held is None or held[0] is not context:
            auth = ThreadAuthenticator(context)
            auth.start()
            _authenticators[id(context)] = held = (context, auth)
        held[1].configure_curve_callback(domain=domain, credentials_provider=_AllowOne(keys.client_public))
    return domain


def stop_authenticator(context):
    """Stop the context's ZAP handler (before `context.term()`)."""
    with _lock:
        held = _authenticators.pop(id(context), None)
    if held is not None:
        held[1].stop()


def _common(socket, max_bytes):
    import zmq

    socket.setsockopt(zmq.LINGER, 0)
    socket.setsockopt(zmq.MAXMSGSIZE, int(max_bytes))


def server_socket(context, kind, keys, max_bytes):
    """A CURVE server socket (not yet bound) that admits only clients holding the token."""
    import zmq

    domain = _authenticator(context, keys)
    socket = context.socket(kind)
    _common(socket, max_bytes)
    socket.setsockopt(zmq.ZAP_DOMAIN, domain.encode())
    socket.setsockopt(zmq.CURVE_SECRETKEY, keys.server_secret)
    socket.setsockopt(zmq.CURVE_PUBLICKEY, keys.server_public)
    socket.setsockopt(zmq.CURVE_SERVER, 1)
    return socket


def client_socket(context, kind, keys, max_bytes):
    """A CURVE client socket (not yet connected) that talks only to a server holding the token."""
    import zmq

    socket = context.socket(kind)
    _common(socket, max_bytes)
    socket.setsockopt(zmq.CURVE_SERVERKEY, keys.server_public)
    socket.setsockopt(zmq.CURVE_SECRETKEY, keys.client_secret)
    socket.setsockopt(zmq.CURVE_PUBLICKEY, keys.client_public)
    return socket


def message_key(keys, run_id, direction):
    """The tag key of one run's messages in one direction."""
    run_id, direction = bytes(run_id), direction.encode()
    label = b"eggnog message|" + len(run_id).to_bytes(2, "big") + run_id + b"|" + direction
    return _derive(keys.tag_root, label)


def seal(key, session, body):
    session = bytes(session)
    h = hashlib.blake2b(key=key, digest_size=SEAL_BYTES)
    h.update(len(session).to_bytes(2, "big") + session)
    h.update(memoryview(body))
    return h.digest()


def opened(key, session, received, body):
    """True when `received` is this body's tag for this key and session."""
    received = bytes(received)
    return len(received) == SEAL_BYTES and hmac.compare_digest(received, seal(key, session, body))

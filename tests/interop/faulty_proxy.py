"""A fault-injecting Kafka TCP proxy for the interop suite (loopback only).

FaultyProxy listens on 127.0.0.1:<free port> and forwards every accepted connection to
127.0.0.1:<target_port> (the broker). Kafka frames are 4-byte big-endian length prefixed in
both directions; the proxy parses them so it acts on whole frames only. From each client
request header (api_key int16, api_version int16, correlation_id int32) it remembers the api
key per correlation id, so it knows which broker response answers a Produce request (api key
0). Only Produce responses are ever faulted: Metadata, ApiVersions, InitProducerId, Fetch ...
always flow.

Fault model, while `faults_enabled`: after every N Produce responses, N drawn from
random.Random(seed).randint(*gap) (counted over all connections), one fault:
  drop_reset  drop that Produce response, then reset the connection (SO_LINGER 0, close both
              sides: the client gets an RST, the broker loses the connection); responses
              still in flight on it are lost too. The client retries on a new connection.
  reset       forward the response, then reset the connection as above.
  drop        drop that response and every later one on the connection, and keep it open (a
              stalled path: TCP never loses one response and delivers the next, so neither
              does this): the client's requests time out (librdkafka: socket.timeout.ms; it
              then disconnects) and it retries. No other fault follows until that connection
              closes or `drop_quiet` seconds pass, so the timeout is what the client sees
              rather than a later reset.
Schedule: blocks of shuffled [drop_reset, reset, drop_reset, reset] each followed by one
drop, until `max_drops` drops were injected; then shuffled [drop_reset, reset] pairs. So
every kind shows up early in a run. `counts` tallies the faults injected.
If the broker refuses a connection (e.g. it is down for a restart) the client socket is reset.
"""
import random
import select
import socket
import struct
import threading
import time

DROP_RESET, DROP, RESET = "drop_reset", "drop", "reset"
PRODUCE = 0


def _reset(sock):
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    sock.close()


class FaultyProxy:
    def __init__(self, target_port, seed, gap=(200, 800), max_drops=3, drop_quiet=10.0):
        self.target_port = target_port
        self.seed = seed
        self.gap = gap
        self.max_drops = max_drops
        self.drop_quiet = drop_quiet
        self.rng = random.Random(seed)
        self.faults_enabled = True
        self.counts = {DROP_RESET: 0, RESET: 0, DROP: 0}
        self.produce_responses = 0  # forwarded or dropped, over all connections
        self.connections = 0
        self.refused = 0
        self._schedule = []
        self._until = self.rng.randint(*gap)
        self._quiet = None  # (client socket of the last drop, deadline)
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self._listener.settimeout(0.2)
        self.port = self._listener.getsockname()[1]
        self._thread = threading.Thread(target=self._accept_loop, name="faulty-proxy", daemon=True)
        self._thread.start()

    def stop(self):
        self._stopped.set()
        self._thread.join(timeout=5)
        self._listener.close()

    def _accept_loop(self):
        while not self._stopped.is_set():
            try:
                client, _ = self._listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _next_kind(self):
        if not self._schedule:
            if self.counts[DROP] < self.max_drops:
                block = [DROP_RESET, RESET, DROP_RESET, RESET]
                self.rng.shuffle(block)
                self._schedule = block + [DROP]
            else:
                self._schedule = self.rng.sample([DROP_RESET, RESET], 2)
        return self._schedule.pop(0)

    def _decide(self, api_key, client):
        """The fault for one broker response on `client`'s connection, or None to forward it."""
        if api_key != PRODUCE:
            return None
        with self._lock:
            self.produce_responses += 1
            if self._quiet is not None and time.monotonic() < self._quiet[1]:
                return None
            self._quiet = None
            if not self.faults_enabled:
                return None
            self._until -= 1
            if self._until > 0:
                return None
            self._until = self.rng.randint(*self.gap)
            kind = self._next_kind()
            self.counts[kind] += 1
            if kind == DROP:
                self._quiet = (client, time.monotonic() + self.drop_quiet)
            return kind

    def _serve(self, client):
        try:
            upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=2)
        except OSError:
            with self._lock:
                self.refused += 1
            _reset(client)
            return
        with self._lock:
            self.connections += 1
        upstream.settimeout(None)
        for s in (client, upstream):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        bufs = {client: bytearray(), upstream: bytearray()}
        api_keys = {}  # correlation id -> api key of the client's request
        stalled = False  # a drop: no response goes back on this connection any more
        try:
            while not self._stopped.is_set():
                readable, _, _ = select.select([client, upstream], [], [], 0.2)
                for src in readable:
                    data = src.recv(1 << 16)
                    if not data:  # orderly close by either side: close the other too
                        return
                    buf = bufs[src]
                    buf += data
                    while len(buf) >= 4:
                        end = 4 + int.from_bytes(buf[:4], "big")
                        if len(buf) < end:
                            break
                        frame = bytes(buf[:end])
                        del buf[:end]
                        if src is client:
                            api_key, _version, corr = struct.unpack_from(">hhi", frame, 4)
                            api_keys[corr] = api_key
                            upstream.sendall(frame)
                            continue
                        (corr,) = struct.unpack_from(">i", frame, 4)
                        if stalled:
                            api_keys.pop(corr, None)
                            continue
                        fault = self._decide(api_keys.pop(corr, None), client)
                        stalled = fault == DROP
                        if fault in (None, RESET):
                            client.sendall(frame)
                        if fault in (DROP_RESET, RESET):
                            _reset(client)
                            _reset(upstream)
                            return
        except OSError:
            pass
        finally:
            with self._lock:
                if self._quiet is not None and self._quiet[0] is client:
                    self._quiet = None  # the client gave up on the dropped response
            client.close()  # no-ops after a reset
            upstream.close()

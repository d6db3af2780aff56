"""One TLS connection followed from its handshake: records in, plaintext and notices out.

Sans-IO: :meth:`TlsSession.feed` takes one direction's reassembled bytes
(side 0 = client, 1 = server) and returns :class:`Plain` pieces of decrypted
application data and at most one :class:`Notice` that ends decryption (no
keys, keys that do not decrypt, a stream joined after its handshake, an
unsupported version or suite, bytes that are not TLS). After such a notice the
session takes bytes and returns nothing: nothing is guessed.

Keys are looked up by the ClientHello's random when the first encrypted record
arrives. With a live key log, records wait (at most ``max_held`` bytes) for
their keys to be written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from capture.tls.errors import DecryptError, TlsError
from capture.tls.handshake import (
    CLIENT_HELLO,
    FINISHED,
    KEY_UPDATE,
    SERVER_HELLO,
    ClientHello,
    HandshakeReader,
    ServerHello,
    parse_client_hello,
    parse_server_hello,
)
from capture.tls.keylog import CLIENT_RANDOM, KeyLog, Secrets
from capture.tls.records import ALERT, APPLICATION_DATA, CHANGE_CIPHER_SPEC, HANDSHAKE, RecordReader
from capture.tls.suites import SUITES, TLS12, TLS13, suite_name, version_name

if TYPE_CHECKING:   # loaded with the first keys instead (see TlsSession._keys13)
    from capture.tls.cipher import Aead13, RecordCipher

CLIENT, SERVER = 0, 1
_SIDE = ("client", "server")

# Notice kinds
NO_KEYS, DECRYPT_FAILED, MIDSTREAM, UNSUPPORTED, NOT_TLS = (
    "no_keys", "decrypt_failed", "midstream", "unsupported", "not_tls")


@dataclass(slots=True)
class TlsInfo:
    """What the handshake said, for the dataset; updated in place as the handshake goes."""

    version: str | None = None       # "TLS 1.3"
    cipher: str | None = None        # IANA name, "TLS_AES_256_GCM_SHA384"
    sni: str | None = None
    alpn: str | None = None
    resumed: bool = False
    decrypted: bool = False          # keys found and records decrypting

    def describe(self) -> str:
        parts = [self.version or "TLS (version not seen)"]
        if self.cipher:
            parts.append(self.cipher)
        parts.append(f"SNI {self.sni}" if self.sni else "no SNI")
        if self.resumed:
            parts.append("resumed session")
        return ", ".join(parts)


@dataclass(slots=True)
class Plain:
    side: int
    data: bytes
    ts: int


@dataclass(slots=True)
class Notice:
    kind: str
    detail: str
    ts: int
    side: int | None = None


Output = Plain | Notice


class TlsSession:
    def __init__(self, keylog: KeyLog | None, *, max_held: int = 4 << 20) -> None:
        self.info = TlsInfo()
        self.keylog = keylog
        self.max_held = max_held
        self.client_hello: ClientHello | None = None
        self.server_hello: ServerHello | None = None
        self.ended: Notice | None = None              # the notice that stopped decryption
        self._records = (RecordReader(), RecordReader())
        self._hs = (HandshakeReader(), HandshakeReader())          # plaintext handshake
        self._ehs = (HandshakeReader(), HandshakeReader())         # TLS 1.3 encrypted handshake
        self._encrypted = [False, False]             # TLS 1.2: after this side's ChangeCipherSpec
        self._cipher: list[RecordCipher | None] = [None, None]
        self._app13: list[Aead13 | None] = [None, None]            # TLS 1.3 traffic secret 0 ciphers
        self._keyed = False                           # secrets looked up and ciphers made
        self._held: list[tuple[int, int, bytes, bytes, int]] = []
        self._held_bytes = 0
        self._generation = -1                         # of the key log at the last lookup
        self._secrets: Secrets = {}                   # what that lookup found

    # -- input ---------------------------------------------------------------------------------

    def feed(self, side: int, data: bytes, ts: int) -> list[Output]:
        if self.ended is not None:
            return []
        try:
            records = self._records[side].feed(data)
        except TlsError as exc:
            return [self._end(NOT_TLS, f"{_SIDE[side]} bytes stopped being TLS records: {exc}", ts, side)]
        out: list[Output] = []
        for ctype, header, fragment in records:
            self._record(side, ctype, header, fragment, ts, out)
            if self.ended is not None:
                break
        return out

    def stop(self, why: str, ts: int) -> None:
        """The caller needs no more plaintext (not Kafka): stop decrypting, quietly."""
        if self.ended is None:
            self.ended = Notice("stopped", why, ts)
            self._held, self._held_bytes = [], 0

    def gap(self, side: int, ts: int) -> None:
        """Bytes of this side were lost: record boundaries and sequence numbers with them."""
        if self.ended is None:
            self.ended = Notice("gap", f"{_SIDE[side]} bytes missing: the TLS records after them cannot be "
                                "followed", ts, side)

    def close(self, ts: int) -> list[Output]:
        """End of the connection: a last look for keys, and a notice if it never decrypted."""
        if self.ended is not None:
            return []
        out: list[Output] = []
        if self._held and not self._keyed:
            side, ctype, header, fragment, hts = self._held.pop()
            self._held_bytes -= len(fragment)
            self._record(side, ctype, header, fragment, hts, out, final=True)
            if self.ended is not None:
                return out
        if not self.info.decrypted and self.ended is None:
            if self.client_hello is None:
                out.append(self._end(MIDSTREAM, "no ClientHello seen: keys cannot be matched", ts))
            else:
                out.append(self._end(NO_KEYS, self._no_keys_detail(), ts))
        return out

    # -- records -------------------------------------------------------------------------------

    def _record(self, side: int, ctype: int, header: bytes, fragment: bytes, ts: int, out: list[Output],
                final: bool = False) -> None:
        sh = self.server_hello
        tls13 = sh is not None and sh.version == TLS13
        protected = (ctype == APPLICATION_DATA) if tls13 else self._encrypted[side]
        if not protected:
            if ctype == HANDSHAKE:
                self._plain_handshake(side, fragment, ts, out)
            elif ctype == CHANGE_CIPHER_SPEC and not tls13:
                self._encrypted[side] = True
            elif ctype == APPLICATION_DATA:
                # Application data before any ChangeCipherSpec: the capture missed the handshake.
                out.append(self._end(MIDSTREAM, "encrypted records without the handshake before them: the "
                                     "capture began after it, so no keys can be matched", ts, side))
            return
        if not self._keyed:
            if not self._key(ts, out, final):
                if self.ended is None:
                    self._hold(side, ctype, header, fragment, ts, out)
                return
            held, self._held, self._held_bytes = self._held, [], 0
            for hside, hctype, hheader, hfragment, hts in held:     # keys came late: the waiting ones first
                self._decrypt(hside, hctype, hheader, hfragment, hts, out)
                if self.ended is not None:
                    return
        self._decrypt(side, ctype, header, fragment, ts, out)

    def _plain_handshake(self, side: int, fragment: bytes, ts: int, out: list[Output]) -> None:
        try:
            messages = self._hs[side].feed(fragment)
            for mtype, body in messages:
                if mtype == CLIENT_HELLO and side == CLIENT:
                    hello = parse_client_hello(body)
                    if self.client_hello is None:
                        self.client_hello = hello
                        self.info.sni = hello.sni
                elif mtype == SERVER_HELLO and side == SERVER:
                    hello = parse_server_hello(body)
                    if hello.retry:
                        continue
                    self.server_hello = hello
                    self.info.version = version_name(hello.version)
                    self.info.cipher = suite_name(hello.cipher_suite)
                    self.info.alpn = hello.alpn
                    ch = self.client_hello
                    self.info.resumed = hello.psk_accepted or (
                        hello.version < TLS13 and ch is not None and bool(ch.session_id)
                        and hello.session_id == ch.session_id)
        except TlsError as exc:
            out.append(self._end(NOT_TLS, f"{_SIDE[side]} handshake unreadable: {exc}", ts, side))

    def _hold(self, side: int, ctype: int, header: bytes, fragment: bytes, ts: int, out: list[Output]) -> None:
        self._held.append((side, ctype, header, fragment, ts))
        self._held_bytes += len(fragment)
        if self._held_bytes > self.max_held:
            self._held, self._held_bytes = [], 0
            out.append(self._end(NO_KEYS, self._no_keys_detail() + f" (no key appeared while "
                                 f"{self.max_held >> 20} MiB of its records were held)", ts))

    # -- keys ----------------------------------------------------------------------------------

    def _key(self, ts: int, out: list[Output], final: bool) -> bool:
        """Make the ciphers; False if they cannot be made (yet): a notice says why when never."""
        ch, sh = self.client_hello, self.server_hello
        if ch is None or sh is None:
            what = "ClientHello" if ch is None else "ServerHello"
            out.append(self._end(MIDSTREAM, f"encrypted records but no {what} seen: keys cannot be matched", ts))
            return False
        suite = SUITES.get(sh.cipher_suite)
        if sh.version not in (TLS12, TLS13):
            out.append(self._end(UNSUPPORTED, f"{version_name(sh.version)} is not decrypted (TLS 1.2 and 1.3 are)",
                                 ts))
            return False
        if suite is None or suite.tls13 != (sh.version == TLS13):
            out.append(self._end(UNSUPPORTED, f"cipher suite {suite_name(sh.cipher_suite)} is not decrypted", ts))
            return False
        secrets = self._lookup()
        if sh.version == TLS13:
            # A live log gets a connection's lines one by one: wait for all four, unless it is over.
            whole = self.keylog is None or not self.keylog.live or final
            made = self._keys13(suite, secrets, whole)
        else:
            master = secrets.get(CLIENT_RANDOM)
            made = master is not None and len(master) == 48
            if made:
                from capture.tls.cipher import tls12_ciphers     # see _keys13
                c, s = tls12_ciphers(suite, master, ch.random, sh.random, sh.encrypt_then_mac)
                self._cipher = [c, s]
        if made:
            self._keyed = True
            self.info.decrypted = True
            return True
        if self.keylog is None or not self.keylog.live or final:
            out.append(self._end(NO_KEYS, self._no_keys_detail(), ts))
        return False

    def _lookup(self) -> Secrets:
        log = self.keylog
        if log is None or self.client_hello is None:
            return {}
        if log.live:
            log.refresh()
            if log.generation == self._generation:
                return self._secrets                  # nothing new since the last look
            self._generation = log.generation
        self._secrets = log.lookup(self.client_hello.random)
        return self._secrets

    def _keys13(self, suite, secrets: Secrets, partial_ok: bool) -> bool:
        app = [secrets.get("CLIENT_TRAFFIC_SECRET_0"), secrets.get("SERVER_TRAFFIC_SECRET_0")]
        hs = [secrets.get("CLIENT_HANDSHAKE_TRAFFIC_SECRET"), secrets.get("SERVER_HANDSHAKE_TRAFFIC_SECRET")]
        if app[0] is None and app[1] is None:
            return False
        if not partial_ok and None in app + hs:
            return False
        # Imported here, with the first keys: `cryptography` costs ~30 ms of start-up that a capture
        # without TLS (most of them) never needs.
        from capture.tls.cipher import Aead13
        for side in (CLIENT, SERVER):
            self._app13[side] = Aead13(suite, app[side]) if app[side] is not None else None
            # Without the handshake secret, the handshake records are skipped and the traffic keys tried.
            self._cipher[side] = Aead13(suite, hs[side]) if hs[side] is not None else None
        return True

    def _no_keys_detail(self) -> str:
        ch = self.client_hello
        rnd = f" (client random {ch.random.hex()})" if ch is not None else ""
        if self.keylog is None or not self.keylog.configured:
            return f"{self.info.describe()}: no TLS keys given{rnd}"
        return f"{self.info.describe()}: no keys for this connection in the key log{rnd}"

    # -- decryption ----------------------------------------------------------------------------

    def _decrypt(self, side: int, ctype: int, header: bytes, fragment: bytes, ts: int, out: list[Output]) -> None:
        sh = self.server_hello
        assert sh is not None
        if sh.version == TLS13:
            self._decrypt13(side, header, fragment, ts, out)
            return
        cipher = self._cipher[side]
        assert cipher is not None
        try:
            inner, plain = cipher.decrypt(ctype, header, fragment)
        except DecryptError as exc:
            out.append(self._failed(side, cipher.seq, str(exc), ts))
            return
        if inner == APPLICATION_DATA and plain:
            out.append(Plain(side, plain, ts))

    def _decrypt13(self, side: int, header: bytes, fragment: bytes, ts: int, out: list[Output]) -> None:
        cipher = self._cipher[side]
        if cipher is None:
            cipher = self._app13[side]
            self._cipher[side] = cipher
            if cipher is None:
                out.append(self._end(NO_KEYS, f"{self.info.describe()}: the key log has no "
                                     f"{_SIDE[side].upper()}_TRAFFIC_SECRET_0 for this connection", ts, side))
                return
        try:
            inner, plain = cipher.decrypt(APPLICATION_DATA, header, fragment)
        except DecryptError as exc:
            # Handshake secret missing or skipped: the traffic keys may be the ones in use.
            app = self._app13[side]
            if app is None or cipher is app or app.seq or self._ehs[side].pending:
                out.append(self._failed(side, cipher.seq, str(exc), ts))
                return
            try:
                inner, plain = app.decrypt(APPLICATION_DATA, header, fragment)
            except DecryptError:
                out.append(self._failed(side, cipher.seq, str(exc), ts))
                return
            self._cipher[side] = cipher = app
        if inner == APPLICATION_DATA:
            if plain:
                out.append(Plain(side, plain, ts))
        elif inner == HANDSHAKE:
            try:
                messages = self._ehs[side].feed(plain)
            except TlsError as exc:
                out.append(self._end(NOT_TLS, f"{_SIDE[side]} handshake unreadable: {exc}", ts, side))
                return
            for mtype, _body in messages:
                if mtype == FINISHED and cipher is not self._app13[side]:
                    self._cipher[side] = self._app13[side]     # this side's handshake is over
                elif mtype == KEY_UPDATE:
                    from capture.tls.cipher import Aead13     # loaded by now: keys were made
                    current = self._cipher[side]
                    if isinstance(current, Aead13):
                        self._cipher[side] = current.update()
                        self._app13[side] = self._cipher[side]
        elif inner == ALERT:
            pass                                          # close_notify or an error: the TCP end follows

    def _failed(self, side: int, seq: int, why: str, ts: int) -> Notice:
        return self._end(DECRYPT_FAILED, f"{self.info.describe()}: {_SIDE[side]} record {seq} does not decrypt "
                         f"with the logged keys ({why}); the rest of this connection is not decoded", ts, side)

    def _end(self, kind: str, detail: str, ts: int, side: int | None = None) -> Notice:
        self.ended = Notice(kind, detail, ts, side)
        self._held, self._held_bytes = [], 0
        return self.ended

"""A person and its devices: the signed, append-only device log, resolved to one state.

A **person** is a root identity: an Ed25519 key whose fingerprint is what others verify
(safety numbers are made of it). Each **device** has its own Ed25519 device key, hence
its own SDS sender id and its own group sessions. The **device log** says which device
keys speak for the root (``devices.proto``):

* the **genesis**, signed by the root: the root key is the person's first device (an
  upgraded data directory's identity key becomes the root), and it names the
  **recovery key** (whose seed is the BIP-39 words shown once, :func:`new_recovery`);
* an **add** of a device key, signed by the root, the recovery key or a current device
  (a link, app/members/link.py), with the new device key's own signature of
  ``POP_LABEL || root || device key`` (proof that it holds the key it is certified for,
  for this person only);
* a **revoke** of a device, signed the same way (``/unlink`` from another device, or
  the recovery words when no device is left).

Every entry names by hash the entries its signer held (its **parents**), as the
membership chain does (app/members/resolve.py), and is judged in the state its parents
define: what its signer knew when it signed. Clocks order nothing. The entries form a
DAG rooted at the genesis; :class:`PersonLog` resolves it by a rule that depends on the
entries only, so every member that holds the same entries holds the same devices:

1. **One order.** A topological order: among the entries whose parents are all placed,
   the next is the one of lowest ``(rank, hash)``: rank 0 signed by the recovery key,
   1 by the root, 2 by another device.
2. **Auth state.** An entry counts only if its signer could sign it in the state of its
   parents (a current device, the root while the root's device is not revoked, or the
   recovery key).
3. **Fold.** Applied in that order: an add needs a device key that is not current and
   was never revoked (a revoked device never comes back); a revoke needs a current device.
4. **A revocation cuts.** A revoke of device D beats every entry D signed that is
   concurrent with it (neither its ancestor nor its descendant): those are refused
   ``outside_cut``. The revocations are taken in precedence order, not in their place
   in the DAG: the recovery key's first, then the root's, then other devices', each
   group by hash (:meth:`PersonLog._resolve_within`). So two devices revoking each
   other: the one that ranks first wins, the root beats a device, the recovery key
   beats both, and a revoked device's entries that name parents from before its
   revocation are cut whatever their place in the order.

So a device the root did not certify (directly, or through a device it certified) is
never one of the person's, and anything a revoked device signs after its revocation,
whatever it names as parents, is refused by everyone who holds the revocation.

Pure: no I/O, no clock. Decoding never raises for bad bytes.
"""

from __future__ import annotations

import hashlib
import heapq
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final

from app import AppError
from app.members import devices_pb2 as pb
from app.members.events import SHARE_KEY_BYTES
from app.names import check_nick
from net.identity import PUBLIC_KEY_BYTES, Identity, sender_id_for, verify_signature

__all__ = [
    "DEVICE_LOG_MAGIC",
    "ENTRY_LABEL",
    "MAX_ENTRIES",
    "POP_LABEL",
    "Device",
    "DeviceState",
    "Entry",
    "People",
    "PersonLog",
    "RecoveryError",
    "decode_device_log",
    "decode_entry",
    "encode_device_log",
    "make_add",
    "make_genesis",
    "make_revoke",
    "new_recovery",
    "proof_of_possession",
    "recovery_from_words",
]

ENTRY_LABEL: Final = b"sdschat-device-entry-v1\0"
"""What an entry's signer signs, before the ``Entry`` bytes."""

POP_LABEL: Final = b"sdschat-device-pop-v1\0"
"""What a new device signs (proof of possession), before the ``Entry`` bytes."""

HASH_LABEL: Final = b"sdschat-device-entry-hash-v1\0"

DEVICE_LOG_MAGIC: Final = b"\xffSD\x01"
"""First bytes of the SDS content carrying device-log entries in a public or
passphrase channel (0xFF never starts UTF-8 text)."""

MAX_PARENTS: Final = 16
MAX_ENTRIES: Final = 64
"""Entries kept per person (a person links a few devices in its life)."""
MAX_HELD: Final = 64
"""Entries held per person while their parents have not come."""
MAX_DEVICE_NAME: Final = 64


class RecoveryError(AppError, ValueError):
    """Recovery words that are not a valid BIP-39 phrase of this key."""


# -- entries on the wire ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Entry:
    """A decoded, signature-checked device-log entry."""

    hash: bytes
    root: bytes
    signer: bytes
    parents: tuple[bytes, ...]
    kind: str
    """``genesis``, ``add`` or ``revoke``."""
    device: bytes
    """The device added or revoked (the root for the genesis)."""
    name: str
    """The device's name (add, genesis)."""
    recovery: bytes
    """The recovery key (genesis only)."""
    raw: bytes
    """The ``SignedEntry`` bytes (what is stored and handed on)."""
    share_key: bytes = b""
    """An add: the device's X25519 share key in members channels (empty: none named)."""
    pop: bytes = b""
    """An add: the device's proof of possession (``POP_LABEL || root || device``)."""

    @property
    def root_id(self) -> str:
        return sender_id_for(self.root)

    @property
    def short(self) -> str:
        return self.hash.hex()[:12]


def entry_hash(body: bytes) -> bytes:
    return hashlib.sha256(HASH_LABEL + body).digest()


def _sign(signer: Identity, msg: pb.Entry, pop: bytes = b"") -> bytes:
    body = msg.SerializeToString(deterministic=True)
    signed = pb.SignedEntry(body=body, signature=signer.sign(ENTRY_LABEL + body),
                            device_signature=pop)  # fmt: skip
    return signed.SerializeToString(deterministic=True)


def proof_of_possession(device: Identity, root_public: bytes) -> bytes:
    """``device``'s signature saying it is a device of ``root_public`` (what an add
    carries; the device makes it, whoever signs the add: a link sends it over)."""
    return device.sign(POP_LABEL + root_public + device.public_key)


def make_genesis(root: Identity, recovery_public: bytes, device_name: str) -> bytes:
    """The genesis of ``root``'s device log (the root is the first device, called
    ``device_name``), naming the recovery key."""
    genesis = pb.Genesis(recovery=recovery_public, device_name=device_name)
    msg = pb.Entry(root=root.public_key, signer=root.public_key, genesis=genesis)
    return _sign(root, msg)


def make_add(root_public: bytes, signer: Identity, parents: Sequence[bytes],
             device: Identity | bytes, name: str, pop: bytes = b"",
             share_key: bytes = b"") -> bytes:  # fmt: skip
    """An add of ``device`` (called ``name``) to ``root_public``'s devices, signed by
    ``signer`` (the root, the recovery key or a current device), with the device's
    :func:`proof_of_possession` (made here when ``device`` is its identity, else ``pop``)
    and the X25519 ``share_key`` members channels seal to for it (may be empty)."""
    key = device.public_key if isinstance(device, Identity) else device
    if isinstance(device, Identity):
        pop = proof_of_possession(device, root_public)
    msg = pb.Entry(root=root_public, signer=signer.public_key, parents=sorted(set(parents)),
                   add=pb.AddDevice(device=key, name=name, share_key=share_key))  # fmt: skip
    return _sign(signer, msg, pop)


def make_revoke(root_public: bytes, signer: Identity, parents: Sequence[bytes],
                device_public: bytes) -> bytes:  # fmt: skip
    """A revocation of ``device_public``, signed by ``signer``."""
    msg = pb.Entry(root=root_public, signer=signer.public_key, parents=sorted(set(parents)),
                   revoke=pb.RevokeDevice(device=device_public))  # fmt: skip
    return _sign(signer, msg)


def decode_entry(raw: bytes) -> Entry | str:
    """A checked entry, or the reason it is refused (``malformed``, ``bad_signature``,
    ``bad_device_signature``): signatures and fields, not yet whether its signer may
    sign it (that is the log's, :class:`PersonLog`)."""
    signed = pb.SignedEntry()
    msg = pb.Entry()
    try:
        signed.ParseFromString(raw)
        msg.ParseFromString(signed.body)
    except Exception:
        return "malformed"
    root, signer = bytes(msg.root), bytes(msg.signer)
    if len(root) != PUBLIC_KEY_BYTES or len(signer) != PUBLIC_KEY_BYTES:
        return "malformed"
    body = bytes(signed.body)
    if not verify_signature(signer, bytes(signed.signature), ENTRY_LABEL + body):
        return "bad_signature"
    kind = msg.WhichOneof("body")
    parents = tuple(bytes(p) for p in msg.parents)
    if kind is None or len(parents) > MAX_PARENTS or any(len(p) != 32 for p in parents) or (
            len(set(parents)) != len(parents)):  # fmt: skip
        return "malformed"
    if (kind == "genesis") != (not parents):
        return "malformed"  # the genesis alone names no parents
    name, recovery, device, share, pop = "", b"", root, b"", b""
    if kind == "genesis":
        recovery, name = bytes(msg.genesis.recovery), msg.genesis.device_name
        if signer != root or len(recovery) != PUBLIC_KEY_BYTES or recovery == root:
            return "malformed"
    elif kind == "add":
        device, name = bytes(msg.add.device), msg.add.name
        share, pop = bytes(msg.add.share_key), bytes(signed.device_signature)
        if len(device) != PUBLIC_KEY_BYTES or len(share) not in (0, SHARE_KEY_BYTES):
            return "malformed"
        if not verify_signature(device, pop, POP_LABEL + root + device):
            return "bad_device_signature"
    else:
        device = bytes(msg.revoke.device)
        if len(device) != PUBLIC_KEY_BYTES:
            return "malformed"
    if kind != "revoke":
        try:
            if not name or len(name) > MAX_DEVICE_NAME or check_nick(name) != name:
                return "malformed"
        except ValueError:
            return "malformed"
    return Entry(entry_hash(body), root, signer, parents, kind, device, name, recovery, raw,
                 share, pop)  # fmt: skip


def encode_device_log(entries: Iterable[bytes]) -> bytes:
    """The SDS content carrying ``entries`` (``SignedEntry`` bytes) in a public or
    passphrase channel."""
    log = pb.DeviceLog(entries=[_parsed(e) for e in entries])
    return DEVICE_LOG_MAGIC + log.SerializeToString(deterministic=True)


def _parsed(raw: bytes) -> pb.SignedEntry:
    signed = pb.SignedEntry()
    signed.ParseFromString(raw)
    return signed


def decode_device_log(content: bytes) -> list[bytes] | None:
    """The ``SignedEntry`` bytes of :func:`encode_device_log` content, else ``None``."""
    if content[: len(DEVICE_LOG_MAGIC)] != DEVICE_LOG_MAGIC:
        return None
    log = pb.DeviceLog()
    try:
        log.ParseFromString(content[len(DEVICE_LOG_MAGIC) :])
    except Exception:
        return None
    return [e.SerializeToString(deterministic=True) for e in log.entries[:MAX_ENTRIES]]


# -- recovery words ------------------------------------------------------------------


def new_recovery() -> tuple[Identity, str]:
    """A fresh recovery key and its 24 BIP-39 words (its 32-byte seed: ``mnemonic``)."""
    from mnemonic import Mnemonic

    seed = os.urandom(32)
    return Identity.from_private_bytes(seed), str(Mnemonic("english").to_mnemonic(seed))


def recovery_from_words(words: str) -> Identity:
    """The recovery key of its BIP-39 words (spaces and case do not matter).

    Raises:
        RecoveryError: not 24 words of the BIP-39 English list, or a bad checksum.
    """
    from mnemonic import Mnemonic

    m = Mnemonic("english")
    phrase = " ".join(words.lower().split())
    if len(phrase.split()) != 24:
        raise RecoveryError(f"recovery words are 24 words; got {len(phrase.split())}")
    unknown = [w for w in phrase.split() if w not in m.wordlist]
    if unknown:
        raise RecoveryError(f"not a recovery word: {unknown[0]!r}")
    if not m.check(phrase):
        raise RecoveryError("the recovery words do not check out (a word is wrong or moved)")
    return Identity.from_private_bytes(bytes(m.to_entropy(phrase)))


# -- the log ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Device:
    """A device of a person: its key, its name, the entry that added it."""

    key: bytes
    name: str
    added_by: bytes
    share_key: bytes = b""
    """Its X25519 share key in members channels (empty: its add named none)."""
    pop: bytes = b""
    """Its proof of possession for the root (empty for the root itself)."""

    @property
    def device_id(self) -> str:
        """Its SDS sender id."""
        return sender_id_for(self.key)


@dataclass(slots=True)
class DeviceState:
    """The resolved devices of one person (or the state partway through a fold)."""

    recovery: bytes = b""
    devices: dict[bytes, Device] = field(default_factory=dict)
    revoked: dict[bytes, bytes] = field(default_factory=dict)
    """Revoked device keys -> the revoking entry."""
    revocations: list[tuple[bytes, bytes]] = field(default_factory=list)
    """Applied revocations in order: (entry hash, device key)."""
    has_genesis: bool = False


class PersonLog:
    """The device log of one person (root key ``root``) and its resolved state."""

    def __init__(self, root: bytes) -> None:
        self.root = root
        self.root_id = sender_id_for(root)
        self.entries: dict[bytes, Entry] = {}
        self.pending: dict[bytes, Entry] = {}
        self.state = DeviceState()
        self.outcomes: dict[bytes, str] = {}
        self._children: dict[bytes, list[bytes]] = {}
        self._auth: dict[bytes, DeviceState] = {}

    # -- feeding -------------------------------------------------------------

    def take(self, entry: Entry, resolve: bool = True) -> str:
        """Take one decoded entry of this person; returns ``""`` when it is in the DAG
        (its outcome: :attr:`outcomes`), else why not (``wrong_person``, ``held``,
        ``held_full``, ``full``). ``resolve=False``: the state and outcomes are made
        again only at :meth:`resolve` (a batch resolves once)."""
        if entry.root != self.root:
            return "wrong_person"
        if entry.hash in self.entries or entry.hash in self.pending:
            return ""
        if len(self.entries) >= MAX_ENTRIES:
            return "full"
        if entry.kind == "genesis" and any(e.kind == "genesis" for e in self.entries.values()):
            self.entries[entry.hash] = entry  # a second root: kept, refused by the fold
            if resolve:
                self._resolve()
            return ""
        if any(p not in self.entries for p in entry.parents):
            if len(self.pending) >= MAX_HELD:
                return "held_full"
            self.pending[entry.hash] = entry
            return "held"
        self._insert(entry)
        progressed = True
        while progressed:  # bounded: each pass inserts one held entry or stops
            progressed = False
            for h, held in list(self.pending.items()):
                if all(p in self.entries for p in held.parents):
                    del self.pending[h]
                    self._insert(held)
                    progressed = True
        if resolve:
            self._resolve()
        return ""

    def resolve(self) -> None:
        """Make the state and the outcomes again from every entry held."""
        self._resolve()

    def _insert(self, entry: Entry) -> None:
        self.entries[entry.hash] = entry
        for p in entry.parents:
            self._children.setdefault(p, []).append(entry.hash)
        # an entry's ancestors never change: the auth states kept stay true

    @property
    def heads(self) -> list[bytes]:
        """The entries no other entry names (what a new entry names as parents)."""
        named = {p for e in self.entries.values() for p in e.parents}
        return sorted(h for h in self.entries if h not in named)

    # -- resolution ----------------------------------------------------------

    def _rank(self, e: Entry, recovery: bytes) -> int:
        if recovery and e.signer == recovery:
            return 0
        return 1 if e.signer == self.root else 2

    def _genesis_recovery(self) -> bytes:
        gens = sorted((e for e in self.entries.values() if e.kind == "genesis"),
                      key=lambda e: e.hash)  # fmt: skip
        return gens[0].recovery if gens else b""

    def _topo(self, within: set[bytes]) -> list[bytes]:
        recovery = self._genesis_recovery()
        missing = {h: sum(1 for p in self.entries[h].parents if p in within) for h in within}
        ready = [((self._rank(self.entries[h], recovery), h), h) for h, n in missing.items()
                 if n == 0]  # fmt: skip
        heapq.heapify(ready)
        out: list[bytes] = []
        while ready:
            _, h = heapq.heappop(ready)
            out.append(h)
            for c in self._children.get(h, ()):
                if c in missing:
                    missing[c] -= 1
                    if missing[c] == 0:
                        heapq.heappush(ready, ((self._rank(self.entries[c], recovery), c), c))
        return out

    def _ancestors(self, h: bytes) -> set[bytes]:
        seen: set[bytes] = set()
        stack = list(self.entries[h].parents)
        while stack:
            x = stack.pop()
            if x not in seen:
                seen.add(x)
                stack.extend(self.entries[x].parents)
        return seen

    def _descendants(self, h: bytes, within: set[bytes]) -> set[bytes]:
        seen: set[bytes] = set()
        stack = list(self._children.get(h, ()))
        while stack:
            x = stack.pop()
            if x not in seen and x in within:
                seen.add(x)
                stack.extend(self._children.get(x, ()))
        return seen

    def _auth_state(self, e: Entry) -> DeviceState:
        """The state the entry's parents define (what its signer knew)."""
        key = e.hash
        cached = self._auth.get(key)
        if cached is None:
            within = self._ancestors(e.hash)
            cached = self._resolve_within(within)[0] if within else DeviceState()
            self._auth[key] = cached
        return cached

    def _may_sign(self, st: DeviceState, e: Entry) -> str:
        if e.kind == "genesis":
            return "second_root" if st.has_genesis else ""
        if not st.has_genesis:
            return "no_genesis"
        if e.signer == st.recovery:
            return ""
        if e.signer in st.devices:
            return ""  # the root is a device while it is not revoked
        return "revoked_signer" if e.signer in st.revoked else "not_a_device"

    def _fold(self, order: list[bytes], cut: set[bytes]) -> tuple[DeviceState, dict[bytes, str]]:
        st = DeviceState()
        outcomes: dict[bytes, str] = {}
        for h in order:
            e = self.entries[h]
            if h in cut:
                outcomes[h] = "outside_cut"
                continue
            reason = self._may_sign(self._auth_state(e), e) if e.parents else ""
            reason = reason or self._check(st, e)
            outcomes[h] = reason
            if not reason:
                _apply(st, e)
        return st, outcomes

    def _check(self, st: DeviceState, e: Entry) -> str:
        if e.kind == "genesis":
            return "second_root" if st.has_genesis else ""
        if not st.has_genesis:
            return "no_genesis"
        why = self._may_sign(st, e)  # and in the state built so far (a cut signer)
        if why:
            return why
        if e.kind == "add":
            if e.device in st.revoked:
                return "revoked_device"
            return "already_device" if e.device in st.devices else ""
        return "" if e.device in st.devices else "not_a_device"

    def _resolve_within(self, within: set[bytes]) -> tuple[DeviceState, dict[bytes, str]]:
        """Rule 4: the revocations decide the cut in precedence order (the recovery
        key's first, then the root's, then other devices', each group by hash),
        whatever their place in the DAG, so a revoked device cannot win by naming
        parents from before its revocation. A revocation counts if its signer may sign
        it in the state of its ancestors without the entries cut so far, and its
        device is current there: it cuts the device's entries concurrent with it. One
        that would cut a revocation that counted already loses, and is cut; one of a
        device revoked already adds nothing."""
        order = self._topo(within)
        recovery = self._genesis_recovery()
        revokes = sorted((h for h in within if self.entries[h].kind == "revoke"),
                         key=lambda h: (self._rank(self.entries[h], recovery), h))  # fmt: skip
        cut: set[bytes] = set()
        counted: list[bytes] = []
        revoked: set[bytes] = set()
        for rev in revokes:  # bounded: each once
            e = self.entries[rev]
            if rev in cut or e.device in revoked:
                continue
            before = self._ancestors(rev)
            st, _ = self._fold([h for h in order if h in before], cut)
            if self._may_sign(self._auth_state(e), e) or self._may_sign(st, e) or (
                    e.device not in st.devices):  # fmt: skip
                continue
            after = self._descendants(rev, within)
            conc = {h for h in within if self.entries[h].signer == e.device
                    and h != rev and h not in before and h not in after}  # fmt: skip
            if any(c in conc for c in counted):
                cut.add(rev)  # it loses to a revocation that ranks before it
                continue
            counted.append(rev)
            revoked.add(e.device)
            cut |= conc
        return self._fold(order, cut)

    def _resolve(self) -> None:
        self.state, self.outcomes = self._resolve_within(set(self.entries))

    # -- questions -----------------------------------------------------------

    def devices(self) -> list[Device]:
        """The current devices, the root first, then by name."""
        return sorted(self.state.devices.values(),
                      key=lambda d: (d.key != self.root, d.name, d.key))  # fmt: skip

    def is_device(self, key: bytes) -> bool:
        return key in self.state.devices

    def device_by_id(self, device_id: str) -> Device | None:
        return next((d for d in self.state.devices.values() if d.device_id == device_id), None)

    def revoked_ids(self) -> set[str]:
        return {sender_id_for(k) for k in self.state.revoked}

    @property
    def recovery(self) -> bytes:
        return self.state.recovery

    def raw_entries(self) -> list[bytes]:
        """Every entry, parents first (what is stored and handed on)."""
        return [self.entries[h].raw for h in self._topo(set(self.entries))]


def _apply(st: DeviceState, e: Entry) -> None:
    if e.kind == "genesis":
        st.has_genesis = True
        st.recovery = e.recovery
        st.devices[e.root] = Device(e.root, e.name, e.hash)
    elif e.kind == "add":
        st.devices[e.device] = Device(e.device, e.name, e.hash, e.share_key, e.pop)
    else:
        st.devices.pop(e.device, None)
        st.revoked[e.device] = e.hash
        st.revocations.append((e.hash, e.device))


class People:
    """Every person's device log a node holds, and who speaks for whom.

    Feed it entries from anywhere (a channel's device-log content, a link, a members
    channel's records) with :meth:`take`; ask :meth:`person_of` which person a sender
    id speaks for (``None``: nobody's device, or a person's root without a log)."""

    def __init__(self) -> None:
        self.logs: dict[str, PersonLog] = {}
        self._by_device: dict[str, str] = {}
        self.refused: dict[str, int] = {}

    def take(self, raw: bytes) -> tuple[str, Entry | None]:
        """Take one ``SignedEntry``; ``(reason, entry)``: ``""`` when taken (its outcome
        in its person's log), else why not."""
        why, entry, log = self._put(raw, resolve=True)
        return self._outcome(why, entry, log), entry

    def take_all(self, raws: Iterable[bytes]) -> list[str]:
        """Take many entries, each person's log resolved once at the end (a log of n
        entries taken one by one is resolved n times); the reason of each, as
        :meth:`take` gives it."""
        taken = [self._put(raw, resolve=False) for raw in raws]
        for log in {id(lg): lg for _w, _e, lg in taken if lg is not None}.values():
            log.resolve()
            self._index(log)
        return [self._outcome(why, entry, log) for why, entry, log in taken]

    def _put(self, raw: bytes, resolve: bool) -> tuple[str, Entry | None, PersonLog | None]:
        entry = decode_entry(raw)
        if isinstance(entry, str):
            return entry, None, None
        log = self.logs.get(entry.root_id)
        if log is None:
            if entry.kind != "genesis" and len(self.logs) >= 4096:
                return "full", entry, None
            log = self.logs[entry.root_id] = PersonLog(entry.root)
        why = log.take(entry, resolve=resolve)
        if resolve:
            self._index(log)
        return why, entry, log

    def _outcome(self, why: str, entry: Entry | None, log: PersonLog | None) -> str:
        outcome = why if entry is None or log is None else log.outcomes.get(entry.hash, why)
        if outcome:
            self.refused[outcome] = self.refused.get(outcome, 0) + 1
        return outcome

    def _index(self, log: PersonLog) -> None:
        for dev, root in list(self._by_device.items()):
            if root == log.root_id:
                del self._by_device[dev]
        for d in log.state.devices.values():
            self._by_device[d.device_id] = log.root_id

    def put_log(self, log: PersonLog) -> None:
        """Keep ``log`` (resolved) as its person's whole log, in place of the one held
        (a candidate checked by its caller: :mod:`app.members.device_labels`)."""
        self.logs[log.root_id] = log
        self._index(log)

    def person_of(self, sender_id: str) -> str | None:
        """The root id of the person whose current device ``sender_id`` is."""
        return self._by_device.get(sender_id)

    def log_of(self, root_id: str) -> PersonLog | None:
        return self.logs.get(root_id)

    def siblings(self, sender_id: str) -> set[str]:
        """The sender ids of the other current devices of ``sender_id``'s person."""
        root = self.person_of(sender_id)
        if root is None:
            return set()
        return {d for d, r in self._by_device.items() if r == root and d != sender_id}

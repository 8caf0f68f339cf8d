"""Linking a device with one short code: the protocol, sans-I/O (issue 40 §2).

The **old device** (it holds a current device key of the person) makes a
:class:`LinkCode` and a :class:`LinkOffer`; the person types the code into the **new
device**, which makes a :class:`LinkJoin`. Each side turns frames in into frames out
(:meth:`receive`); the caller carries them over the relay or the LAN on
:func:`link_topic` and gives ``now_ms``. Nothing here reads a clock or does I/O.

1. **PAKE.** Both send a SPAKE2 message (``spake2``: the old device is side A, the new
   one side B, the identities name the role and the nameplate). Each derives the
   shared key; a relay that changed a message, or a side that used another password,
   derives another key.
2. **Confirmation.** Each sends ``HMAC-SHA256(confirm key of its role, transcript)``
   (HKDF-SHA256 subkeys of the SPAKE2 key; the transcript hashes both identities and
   both SPAKE2 messages). A wrong one ends the link at once (``wrong_code``): an online
   guess gets one try, and the offer is spent. Both sides may show :attr:`sas` (six
   digits from the same key) before anything is sent.
3. **Sealed steps** (ChaCha20-Poly1305, one key per direction, the nonce a counter
   that must come in order): the old device sends the person's root key and device
   log (:class:`~app.members.devices.PersonLog` entries); the new device answers with
   its device key, its proof of possession for that root and its name; the old device
   checks the proof, signs the add (:func:`~app.members.devices.make_add`) and hands it
   over with the payload (what the new device needs: opaque here); the new device
   checks that the add makes it a device of that root and says done.

An interrupted link changes nothing: the add exists only in the old device's
:attr:`LinkOffer.add` after ``done`` and in the new device's :attr:`LinkJoin.add` once
the handover checked out; each side keeps it only then. A code is good for one link,
until :data:`LINK_TTL_MS` after it was made.

Run over relays by app/members/link_relay.py: ``/link`` and ``sdschat link`` make a code
(app/members/link_offer.py), ``sdschat join --link CODE`` redeems it
(app/launch/link_join.py).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Final

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from google.protobuf.message import DecodeError

from app import AppError
from app.members import link_pb2 as pb
from app.members.devices import (
    POP_LABEL,
    PersonLog,
    decode_device_log,
    decode_entry,
    encode_device_log,
    make_add,
    proof_of_possession,
)
from app.members.events import SHARE_KEY_BYTES
from net.identity import PUBLIC_KEY_BYTES, Identity, verify_signature

__all__ = [
    "LINK_TTL_MS",
    "LinkCode",
    "LinkError",
    "LinkJoin",
    "LinkOffer",
    "LinkState",
    "link_topic",
    "new_link_code",
    "parse_link_code",
]

LINK_TTL_MS: Final = 10 * 60_000
"""How long a link code is good for."""

VERSION: Final = 1
OLD: Final = 1
NEW: Final = 2
_LABEL: Final = b"sdschat-link-v1"
_MAX_FRAME: Final = 64 * 1024 * 1024
_CODE_RE: Final = re.compile(r"^\s*(\d{4})[\s-]+([a-z]+)[\s-]+([a-z]+)\s*$")


class LinkError(AppError, ValueError):
    """A link code that is not one (what a code looks like is in the message)."""


@dataclass(frozen=True, slots=True)
class LinkCode:
    """``NNNN-word-word``: the nameplate (the rendezvous) and the password (two BIP-39
    words, 22 bits: one online guess per code)."""

    nameplate: str
    password: str

    def __str__(self) -> str:
        return f"{self.nameplate}-{self.password}"


def _words() -> list[str]:
    from mnemonic import Mnemonic

    return list(Mnemonic("english").wordlist)


def new_link_code(entropy: Callable[[int], bytes] = os.urandom) -> LinkCode:
    """A fresh code: 4 random digits and 2 random words of the BIP-39 English list."""
    words = _words()
    raw = int.from_bytes(entropy(8), "big")
    nameplate = f"{raw % 10_000:04d}"
    raw //= 10_000
    first, second = words[raw % 2048], words[(raw // 2048) % 2048]
    return LinkCode(nameplate, f"{first}-{second}")


def parse_link_code(text: str) -> LinkCode:
    """The code typed (case, spaces and dashes between its parts do not matter).

    Raises:
        LinkError: not 4 digits and two words of the list, with what is wrong.
    """
    m = _CODE_RE.match(text.lower())
    if m is None:
        raise LinkError(f"not a link code: {text.strip()!r}; a link code is 4 digits and "
                        "two words, like 4821-tiger-river (shown by /link)")  # fmt: skip
    words = set(_words())
    for w in m.group(2, 3):
        if w not in words:
            raise LinkError(f"not a link code word: {w!r} (check the spelling on the other "
                            "device's screen)")  # fmt: skip
    return LinkCode(m.group(1), f"{m.group(2)}-{m.group(3)}")


def link_topic(nameplate: str) -> bytes:
    """The 16-byte rendezvous topic of a nameplate (as an invite's: the password never
    leaves the devices)."""
    return hashlib.sha256(_LABEL + b"/topic/" + nameplate.encode()).digest()[:16]


class LinkState(Enum):
    WAITING = "waiting"  # for the other side's SPAKE2 message
    CONFIRMING = "confirming"  # key derived, the other's confirmation not yet checked
    SEALED = "sealed"  # key confirmed: steps under way
    DONE = "done"
    FAILED = "failed"


@dataclass(slots=True)
class _Keys:
    confirm_old: bytes
    confirm_new: bytes
    seal_old: ChaCha20Poly1305
    seal_new: ChaCha20Poly1305
    sas: str
    transcript: bytes


def _derive(key: bytes, transcript: bytes) -> _Keys:
    def sub(name: bytes, n: int = 32) -> bytes:
        return HKDF(algorithm=hashes.SHA256(), length=n, salt=transcript,
                    info=_LABEL + b"/" + name).derive(key)  # fmt: skip

    sas = int.from_bytes(sub(b"sas", 8), "big") % 1_000_000
    return _Keys(sub(b"confirm-old"), sub(b"confirm-new"), ChaCha20Poly1305(sub(b"seal-old")),
                 ChaCha20Poly1305(sub(b"seal-new")), f"{sas // 1000:03d} {sas % 1000:03d}",
                 transcript)  # fmt: skip


class _Side:
    """What both sides share: the PAKE, the confirmation, the sealed counters."""

    role: int

    def __init__(self, code: LinkCode, now_ms: int) -> None:
        from spake2 import SPAKE2_A, SPAKE2_B

        self.code = code
        self.started_ms = now_ms
        self.state = LinkState.WAITING
        self.error = ""
        """Why the link failed (``wrong_code``, ``expired``, ``two_answers``,
        ``protocol``, ``not_a_device``, ``aborted: ...``)."""
        id_old = _LABEL + b"/old/" + code.nameplate.encode()
        id_new = _LABEL + b"/new/" + code.nameplate.encode()
        cls = SPAKE2_A if self.role == OLD else SPAKE2_B
        self._pake = cls(code.password.encode(), idA=id_old, idB=id_new)
        self._mine = self._pake.start()
        self._theirs: bytes | None = None
        self._ids = id_old + b"\0" + id_new
        self._keys: _Keys | None = None
        self._sent = 0
        self._received = 0
        self._confirmed = False

    @property
    def other(self) -> int:
        return NEW if self.role == OLD else OLD

    @property
    def sas(self) -> str | None:
        """Six digits both screens show once the key is derived (the same on both only
        if both used the same code and nobody changed a message)."""
        return self._keys.sas if self._keys is not None else None

    def start(self) -> list[bytes]:
        """The first frame to send (this side's SPAKE2 message)."""
        return [self._frame(pake=self._mine)]

    def _frame(self, **body: object) -> bytes:
        frame = pb.LinkFrame(version=VERSION, role=self.role, **body)  # type: ignore[arg-type]
        return frame.SerializeToString(deterministic=True)

    def _fail(self, why: str, tell: bool = True) -> list[bytes]:
        self.state = LinkState.FAILED
        self.error = why
        return [self._frame(abort=why)] if tell else []

    def receive(self, raw: bytes, now_ms: int) -> list[bytes]:
        """One frame from the rendezvous topic in; the frames to send back. Frames of
        our own role (our echo) and anything after the link ended are ignored."""
        if self.state in (LinkState.DONE, LinkState.FAILED):
            return []
        frame = pb.LinkFrame()
        try:
            if len(raw) > _MAX_FRAME:
                raise ValueError("oversized")
            frame.ParseFromString(raw)
        except Exception:
            return []  # not ours to judge: a stray frame on the topic
        if frame.version != VERSION or frame.role != self.other:
            return []
        if now_ms > self.started_ms + LINK_TTL_MS:
            return self._fail("expired")
        kind = frame.WhichOneof("body")
        if kind == "abort":
            return self._fail(f"aborted: {frame.abort[:80]}", tell=False)
        if kind == "pake":
            return self._on_pake(bytes(frame.pake))
        if kind == "confirm" and self.state is LinkState.CONFIRMING:
            return self._on_confirm(bytes(frame.confirm))
        if kind == "sealed" and self.state is LinkState.SEALED:
            step = self._open(frame.sealed)
            if step is None:
                return self._fail("protocol")
            return self._on_step(step, now_ms)
        return self._fail("protocol")

    def _on_pake(self, msg: bytes) -> list[bytes]:
        if self._theirs is not None:
            # the same message again (a relay's copy) changes nothing; another one means
            # a second party answered this code: nobody gets it
            return [] if msg == self._theirs else self._fail("two_answers")
        self._theirs = msg
        try:
            key = self._pake.finish(msg)
        except Exception:
            # spake2 raises SPAKEError, NotOnCurve (an Exception) or ValueError for bytes
            # that are no point of the group: a changed message, whatever it is called
            return self._fail("protocol")
        old, new = (self._mine, msg) if self.role == OLD else (msg, self._mine)
        transcript = hashlib.sha256(self._ids + b"\0" + old + b"\0" + new).digest()
        self._keys = _derive(key, transcript)
        self.state = LinkState.CONFIRMING
        mine = self._keys.confirm_old if self.role == OLD else self._keys.confirm_new
        return [self._frame(confirm=hmac.new(mine, transcript, "sha256").digest())]

    def _on_confirm(self, tag: bytes) -> list[bytes]:
        keys = self._keys
        assert keys is not None
        theirs = keys.confirm_new if self.role == OLD else keys.confirm_old
        if not hmac.compare_digest(tag, hmac.new(theirs, keys.transcript, "sha256").digest()):
            return self._fail("wrong_code")
        self.state = LinkState.SEALED
        return self._confirmed_steps()

    def _confirmed_steps(self) -> list[bytes]:
        return []

    def _seal(self, step: pb.Step) -> bytes:
        keys = self._keys
        assert keys is not None
        aead = keys.seal_old if self.role == OLD else keys.seal_new
        nonce = self._sent.to_bytes(12, "big")
        box = aead.encrypt(nonce, step.SerializeToString(deterministic=True), keys.transcript)
        sealed = pb.Sealed(counter=self._sent, box=box)
        self._sent += 1
        return self._frame(sealed=sealed)

    def _open(self, sealed: pb.Sealed) -> pb.Step | None:
        keys = self._keys
        assert keys is not None
        if sealed.counter != self._received:
            return None  # replayed, reordered or dropped: a relay's doing
        aead = keys.seal_new if self.role == OLD else keys.seal_old
        try:
            plain = aead.decrypt(self._received.to_bytes(12, "big"), bytes(sealed.box),
                                 keys.transcript)  # fmt: skip
            step = pb.Step.FromString(plain)
        except (InvalidTag, DecodeError):  # a forged box, or one that is no Step
            return None
        self._received += 1
        return step

    def _on_step(self, step: pb.Step, now_ms: int) -> list[bytes]:
        raise NotImplementedError


class LinkOffer(_Side):
    """The old device's side: it holds ``device`` (a current device key of the person
    whose device log is ``log``) and the code it shows."""

    role = OLD

    def __init__(self, code: LinkCode, device: Identity, log: PersonLog, payload: bytes,
                 now_ms: int) -> None:  # fmt: skip
        if not log.is_device(device.public_key):
            raise LinkError("this device is not one of the person's current devices")
        self._device = device
        self._log = log
        self._payload = payload
        self.add: bytes | None = None
        """The add of the new device, once it said ``done`` (to keep and publish)."""
        self._pending_add: bytes | None = None
        self.new_device: bytes | None = None
        self.new_name = ""
        super().__init__(code, now_ms)

    def _confirmed_steps(self) -> list[bytes]:
        offer = pb.Offer(root=self._log.root, device_log=encode_device_log(self._log.raw_entries()))
        return [self._seal(pb.Step(offer=offer))]

    def _on_step(self, step: pb.Step, now_ms: int) -> list[bytes]:
        kind = step.WhichOneof("body")
        if kind == "device" and self._pending_add is None:
            dev = step.device
            key, pop, share = bytes(dev.device), bytes(dev.pop), bytes(dev.share_key)
            if len(key) != PUBLIC_KEY_BYTES or len(share) not in (0, SHARE_KEY_BYTES) or (
                    not verify_signature(key, pop, POP_LABEL + self._log.root + key)):  # fmt: skip
                return self._fail("protocol")
            if self._log.is_device(key) or key in self._log.state.revoked:
                return self._fail("not_a_device")
            try:
                add = make_add(self._log.root, self._device, self._log.heads, key, dev.name, pop,
                               share)  # fmt: skip
            except ValueError:
                return self._fail("protocol")
            entry = decode_entry(add)
            if isinstance(entry, str):  # a name the log refuses
                return self._fail("protocol")
            self._pending_add, self.new_device, self.new_name = add, key, dev.name
            handover = pb.Handover(add=add, payload=self._payload)
            return [self._seal(pb.Step(handover=handover))]
        if kind == "done" and self._pending_add is not None:
            self.add = self._pending_add
            self.state = LinkState.DONE
            return []
        return self._fail("protocol")


class LinkJoin(_Side):
    """The new device's side: its own fresh ``device`` key, the name it gets, and the
    X25519 ``share_key`` (public) its members channels seal keys to (empty: none)."""

    role = NEW

    def __init__(self, code: LinkCode, device: Identity, name: str, now_ms: int,
                 share_key: bytes = b"") -> None:  # fmt: skip
        self._device = device
        self._name = name
        self._share_key = share_key
        self.root: bytes | None = None
        self.log: PersonLog | None = None
        """The person's device log, the new device in it, once the handover checked."""
        self.add: bytes | None = None
        self.payload: bytes = b""
        super().__init__(code, now_ms)

    def _on_step(self, step: pb.Step, now_ms: int) -> list[bytes]:
        kind = step.WhichOneof("body")
        if kind == "offer" and self.root is None:
            root = bytes(step.offer.root)
            raws = decode_device_log(bytes(step.offer.device_log))
            if len(root) != PUBLIC_KEY_BYTES or raws is None:
                return self._fail("protocol")
            log = PersonLog(root)
            for raw in raws:
                entry = decode_entry(raw)
                if not isinstance(entry, str):
                    log.take(entry)
            self.root, self.log = root, log
            pop = proof_of_possession(self._device, root)
            device = pb.Device(device=self._device.public_key, pop=pop, name=self._name,
                               share_key=self._share_key)  # fmt: skip
            return [self._seal(pb.Step(device=device))]
        if kind == "handover" and self.log is not None and self.add is None:
            entry = decode_entry(bytes(step.handover.add))
            if (isinstance(entry, str) or entry.device != self._device.public_key
                    or entry.share_key != self._share_key):  # fmt: skip
                return self._fail("protocol")
            self.log.take(entry)
            if not self.log.is_device(self._device.public_key):
                return self._fail("not_a_device")
            self.add, self.payload = bytes(step.handover.add), bytes(step.handover.payload)
            self.state = LinkState.DONE
            return [self._seal(pb.Step(done=pb.Done()))]
        return self._fail("protocol")

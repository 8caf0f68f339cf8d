"""Scalable Data Sync (SDS): the protocol core of sdschat, sans-I/O.

Wire-compatible with js-waku's ``@waku/sds``. No clocks, sockets, threads or
global randomness: the caller passes ``now_ms`` and a ``random.Random``.

Typical use::

    ch = sds.Channel("team", my_id, sds.Config(), now_ms, random.Random())
    data = ch.send(b"hello", now_ms)        # broadcast data
    ch.receive(peer_bytes, now_ms, hint)     # bytes from the network
    for ev in ch.events(): ...               # persist / show / act
    for d in ch.datagrams_to_send(): ...     # broadcast d.data
    deadline = ch.get_timer()                # call ch.handle_timer(t) then
"""

from sds.bloom import BloomFilter, RollingBloomFilter
from sds.channel import Channel
from sds.config import PROFILES, Config
from sds.datagram import Datagram
from sds.errors import SdsError
from sds.events import (
    DropReason,
    EphemeralReceived,
    Event,
    MessageAcknowledged,
    MessageConflict,
    MessageDelivered,
    MessageDropped,
    MessageLost,
    MessagePossiblyAcknowledged,
    MessageResent,
    MessageSendFailed,
    MessageSent,
    MessagesMissing,
    RepairDataNeeded,
    RepairRequested,
    RepairRequestReceived,
    RepairSent,
    SyncReceived,
    SyncSent,
)
from sds.ids import ID_NONCE_BYTES, id_form, message_id_for, verify_message_id
from sds.message import DecodeError, HistoryEntry, Message, MessageKind, decode, encode
from sds.outgoing import OwnState
from sds.participant import Participant
from sds.state import STATE_VERSION, ChannelState
from sds.tuning import MAX_ID_LENGTH, MAX_LAMPORT

__all__ = [
    "ID_NONCE_BYTES",
    "MAX_ID_LENGTH",
    "MAX_LAMPORT",
    "PROFILES",
    "STATE_VERSION",
    "BloomFilter",
    "Channel",
    "ChannelState",
    "Config",
    "Datagram",
    "DecodeError",
    "DropReason",
    "EphemeralReceived",
    "Event",
    "HistoryEntry",
    "Message",
    "MessageAcknowledged",
    "MessageConflict",
    "MessageDelivered",
    "MessageDropped",
    "MessageKind",
    "MessageLost",
    "MessagePossiblyAcknowledged",
    "MessageResent",
    "MessageSendFailed",
    "MessageSent",
    "MessagesMissing",
    "OwnState",
    "Participant",
    "RepairDataNeeded",
    "RepairRequestReceived",
    "RepairRequested",
    "RepairSent",
    "RollingBloomFilter",
    "SdsError",
    "SyncReceived",
    "SyncSent",
    "decode",
    "encode",
    "id_form",
    "message_id_for",
    "verify_message_id",
]

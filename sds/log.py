"""The log window: the messages a channel holds, in order, and their history entries.

Spec "Resolve Conflicts": the log is ordered by ``(lamport_timestamp, message_id)``.
:class:`ChannelLog` keeps the newest ``Config.log_window`` entries (older ones are
the application's, in its storage), each with what later causal histories need to
name it: its sender, its retrieval hint and, once built, its serialised one-entry
history fragment. Inserting costs ``O(log n)``; nothing here is proportional to the
history size.

Owned by :class:`sds.channel.Channel`, which inserts what it delivers or sends; its
other parts read :attr:`ChannelLog.entries`. Nothing here calls out.
"""

from __future__ import annotations

from dataclasses import dataclass

from sortedcontainers import SortedList

from sds import sds_pb2
from sds.config import Config
from sds.message import HistoryEntry
from sds.tuning import MAX_LAMPORT

__all__ = ["ChannelLog", "LogEntry", "entry_pb", "fragment"]


@dataclass(slots=True)
class LogEntry:
    lamport: int
    sender_id: str
    retrieval_hint: bytes | None
    #: Serialised ``SdsMessage(causal_history=[this entry])``; concatenating such
    #: fragments after a serialised message appends history entries (protobuf
    #: merge semantics), which makes building a 200-entry message cheap.
    fragment: bytes | None = None
    #: Bloom-filter bit positions of the id (computed when first needed).
    positions: tuple[tuple[int, int], ...] | None = None
    #: When it entered our log (our clock; 0 for entries restored from a saved state).
    logged_ms: int = 0
    #: Delivered with dependencies declared lost: not named in our causal histories
    #: (:meth:`ChannelLog.withhold`).
    withheld: bool = False


def entry_pb(entry: HistoryEntry) -> sds_pb2.HistoryEntry:
    """``entry`` as the protobuf ``HistoryEntry`` of the wire."""
    pb = sds_pb2.HistoryEntry(message_id=entry.message_id)
    if entry.retrieval_hint is not None:
        pb.retrieval_hint = entry.retrieval_hint
    if entry.sender_id is not None:
        pb.sender_id = entry.sender_id
    return pb


class ChannelLog:
    """The newest ``Config.log_window`` log entries, ordered, and how many went before."""

    __slots__ = ("config", "earliest_logged_ms", "entries", "evicted", "keys", "withheld")

    def __init__(self, config: Config) -> None:
        self.config = config
        #: ``(lamport, message_id)`` of every entry, ascending
        self.keys: SortedList = SortedList()
        self.entries: dict[str, LogEntry] = {}
        #: Smallest ``logged_ms`` of any entry ever logged (never grows): while
        #: nothing logged is older than the settling time, no bloom filter is checked
        #: for what its sender lacks (:meth:`sds.naming.Naming.name_lacking`).
        self.earliest_logged_ms = MAX_LAMPORT
        #: entries that left the window (the log's total is ``evicted + len(keys)``)
        self.evicted = 0
        #: entries delivered past lost ids (:meth:`withhold`)
        self.withheld = 0

    def ids(self) -> list[str]:
        """Ids in log order."""
        return [mid for _, mid in self.keys]

    def insert(
        self, message_id: str, lamport: int, sender_id: str, hint: bytes | None, logged_ms: int
    ) -> int:
        """Enter a message; return its position in the whole log (evicted ones included).
        The oldest entries beyond the window leave it."""
        key = (lamport, message_id)
        keys = self.keys
        keys.add(key)
        self.entries[message_id] = LogEntry(lamport, sender_id, hint, logged_ms=logged_ms)
        if logged_ms < self.earliest_logged_ms:
            self.earliest_logged_ms = logged_ms
        position: int = self.evicted + keys.bisect_left(key)
        while len(keys) > self.config.log_window:
            _, old = keys.pop(0)
            if self.entries.pop(old).withheld:
                self.withheld -= 1
            self.evicted += 1
        return position

    def withhold(self, message_id: str) -> None:
        """Logged ``message_id`` was delivered with dependencies declared lost: our
        content messages do not name it, our syncs do. A member that lacks it and
        reads it in a line waits for it, and it waits for what nobody could supply:
        the messages of identities naming invented ids (issue 26), taken once those
        ids were declared lost, held up honest lines for rounds of repair. A sync
        makes nobody wait (a member that lacks what it names asks for it, and so
        the channel still converges), and the sender still gets its acknowledgement
        from our bloom filter."""
        le = self.entries.get(message_id)
        if le is not None and not le.withheld:
            le.withheld = True
            self.withheld += 1

    def set_hint(self, message_id: str, hint: bytes) -> None:
        """Attach a retrieval hint to a logged message (its fragment is built again)."""
        le = self.entries.get(message_id)
        if le is not None:
            le.retrieval_hint = bytes(hint)
            le.fragment = None


def fragment(message_id: str, le: LogEntry) -> bytes:
    """``le``'s serialised one-entry history fragment, built and kept on first use."""
    pb = sds_pb2.SdsMessage()
    entry = HistoryEntry(message_id, le.retrieval_hint, le.sender_id)
    pb.causal_history.append(entry_pb(entry))
    le.fragment = pb.SerializeToString()
    return le.fragment

"""The TUI shows a person's devices as one person (issue 40 §1): the node says whose
device a line's key is (``Delivered.person``, ``device``); the rows of bob's desktop and
laptop are one author (one name, colour and fingerprint: the root's), a look-alike key
apart; another device of our own person is marked ``alice · laptop``."""

from __future__ import annotations

from rich.console import Console

from app.chat.lines import encode_content
from app.members.device_labels import DeviceBook
from app.members.devices import decode_entry, encode_device_log, make_add, make_genesis
from app.node.events import ChannelJoined, Delivered
from app.tui.model import ChatModel
from app.tui.render import palette, row_lines
from net.identity import Identity
from storage import LogEntry

ME = "a" * 32
BOB, LAPTOP, MALLORY, MY_LAPTOP = "b" * 32, "c" * 32, "d" * 32, "e" * 32


def _line(mid: str, sender: str, lamport: int, person: str = "", device: str = "",
          label: str = "bob", name: str = "bob",
          own_device: bool = False) -> Delivered:  # fmt: skip
    return Delivered("general", mid, sender, name, "msg", mid, lamport, 0, 0, label=label,
                     person=person, device=device, own_device=own_device)  # fmt: skip


def test_a_persons_devices_are_one_author_and_a_look_alike_is_told_apart_by_the_root() -> None:
    m = ChatModel(ME, "alice")
    m.apply(ChannelJoined("general", True, "00", 0), 0)
    m.channels["general"].loaded = True
    m.apply(_line("m1", BOB, 1, BOB, "desktop"), 0)
    m.apply(_line("m2", LAPTOP, 2, BOB, "laptop"), 0)
    rows = {r.message_id: r for r in m.channels["general"].rows}
    assert rows["m1"].who == rows["m2"].who == "bob"  # one person: no fingerprint needed
    assert rows["m1"].colour == rows["m2"].colour
    m.apply(_line("m3", MALLORY, 3), 0)  # another key calls itself bob
    rows = {r.message_id: r for r in m.channels["general"].rows}
    assert rows["m1"].who == rows["m2"].who == f"bob ({BOB[:8]})"  # the root's fingerprint
    assert rows["m3"].who == f"bob ({MALLORY[:8]})"
    shown = "".join(t.plain for t in row_lines(rows["m2"], 100, Console(), palette(True)))
    assert f"({BOB[:8]})" in shown and LAPTOP[:8] not in shown  # the root's fingerprint


def test_another_device_of_our_own_person_is_marked_with_its_name() -> None:
    m = ChatModel(ME, "alice")
    m.apply(ChannelJoined("general", True, "00", 0), 0)
    m.channels["general"].loaded = True
    root = "f" * 32  # we are alice's laptop; her desktop is her root
    m.apply(_line("m1", MY_LAPTOP, 1, root, "desktop", label="alice · desktop", name="alice",
                  own_device=True), 0)  # fmt: skip
    row = m.channels["general"].rows[0]
    assert row.who == "alice · desktop" and row.author_id == ME  # ours: no look-alike of us
    assert not row.shared_name
    # another person who names itself "alice · phone" and its device "phone" (both its
    # own choice) is not shown as ours: whether a device is ours is the node's word
    m.apply(_line("m2", BOB, 2, BOB, "phone", label="alice · phone", name="alice · phone"), 0)
    other = m.channels["general"].rows[1]
    assert other.author_id == BOB and other.device == ""


def test_rows_read_back_from_the_database_are_labelled_by_the_nodes_device_logs() -> None:

    root, laptop = Identity.generate(), Identity.generate()
    genesis = make_genesis(root, Identity.generate().public_key, "desktop")
    g = decode_entry(genesis)
    assert not isinstance(g, str)
    add = make_add(root.public_key, root, [g.hash], laptop, "laptop")
    book = DeviceBook()
    assert book.take(root.sender_id, encode_device_log([genesis, add])) == ""
    m = ChatModel(ME, "alice")
    m.devices = book
    rows = [m.row_from_entry(LogEntry("general", f"{i:064x}", sid, i, encode_content(
        "hi", "bob", "msg"), None, 0, 0)) for i, sid in enumerate((root.sender_id,
                                                                   laptop.sender_id))]  # fmt: skip
    assert rows[0].author_id == rows[1].author_id == root.sender_id
    assert rows[1].device == ""  # not our person's: no device mark

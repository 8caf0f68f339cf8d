"""Issue 39, break 5, with real processes and a real relay: a confusable name impersonates.

"аlice" (a Cyrillic а) asks to be admitted beside the real alice, then renames herself
"alice", then runs her own node with ``--name alice`` so every line she sends claims
"alice" inside its content, then signs ``rename`` events herself (exactly "alice", and
a look-alike) and publishes them through the relay. At every honest member:

* the admission of "аlice" is refused (``name_taken``), and the code still admits her
  under another name;
* ``/nick alice`` and ``/nick аlice`` are refused by her own node (nothing is sent);
* her lines are named by the roster ("mallory"), never by the name they claim;
* her signed ``rename`` to exactly "alice" is refused by every member's fold
  (``name_taken``) and shown; her signed rename to a look-alike is applied, and from
  then on her lines and alice's both carry their authors' fingerprints: no line of
  hers is ever labelled as alice's lines are, in the headless output, ``/members`` and
  ``sdschat history``.

The forged events are built with her own node's modules (its members file, its
identity), the strongest form her own software can sign.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from e2e_helpers import Cluster, Proc, T, cluster, history
from test_e2e_members import _invite, _join_by_invite, _joined, _sees, carol_id
from test_e2e_members_attacks import _crafted, _publish

from app.members import members_pb2 as pb
from app.members import secrets_file
from net.identity import Identity

HOMOGLYPH = "\u0430lice"  # "аlice": a Cyrillic а, then "lice"


def _lines_of(p: Proc, sender: str, text: str) -> list[dict[str, Any]]:
    return [e for e in p.select("delivered") if e.get("sender") == sender and e["text"] == text]


def _members(p: Proc) -> list[dict[str, Any]]:
    before = len(p.select("members", what="members"))
    p.send("/members")
    p.wait_for(lambda: len(p.select("members", what="members")) > before, 20, "/members")
    rows: list[dict[str, Any]] = p.select("members", what="members")[-1]["data"]["members"]
    return rows


def _refused_join(c: Cluster, name: str, code: str, url: str) -> tuple[int, str]:
    argv = [sys.executable, "-m", "app.cli", "join", "--invite", code, "--data-dir",
            str(c.tmp / f"{name}-refused"), "--name", name, "--headless", "--fast",
            "--relay", url]  # fmt: skip
    p = c.start(argv, "homoglyph-join")
    code_ = p.wait(T(90))
    errors = " ".join(str(e.get("message", "")) for e in p.select("error"))
    return code_, errors


def _renamed(p: Proc, member_id: str) -> bool:
    return any(member_id in e["data"].get("renamed", ())
               for e in p.select("members", what="changed"))  # fmt: skip


def _rename_refused(p: Proc, member_id: str) -> bool:
    return any(e["data"].get("author") == member_id and e["data"].get("body") == "rename"
               and e["data"].get("reason") == "name_taken"
               for e in p.select("members", what="rejected"))  # fmt: skip


def _signed_rename(data_dir: Path, name: str, url: str) -> str:
    """A ``rename`` to ``name`` signed with the identity of ``data_dir`` (a copy of it:
    its node runs), on the heads its members file holds, published through the relay;
    its SDS message id."""
    copy = data_dir.with_name(f"{data_dir.name}-copy-{time.monotonic_ns()}")
    shutil.copytree(data_dir, copy)
    data_dir = copy
    mc = secrets_file.load(data_dir, "team")
    assert mc is not None
    ident = Identity.load(data_dir / "identity.pem")
    mc.signer = ident
    content = mc.sign(pb.Chained(rename=pb.Rename(name=name)))  # no check of our own
    mid, env = _crafted(mc, ident, int(time.time() * 1000), content)
    _publish(url, env)
    return mid


def test_a_confusable_name_never_labels_a_line_as_another_members(tmp_path: Path) -> None:
    with cluster(tmp_path) as c:
        _relay, url = c.relay()
        alice = c.node("alice", url, channel="team", extra=["--create"])
        _joined(alice, "created")
        alice_id = carol_id(alice)
        bob = _join_by_invite(c, "bob", _invite(alice), url)

        # 1. admitted as "аlice" beside alice: refused, and the code still works
        code = _invite(alice)
        status, errors = _refused_join(c, HOMOGLYPH, code, url)
        assert status != 0 and "name" in errors, (status, errors)
        alice.wait_for(lambda: any(e["data"].get("reason") == "name_taken"
                                   for e in alice.select("members", what="rejected")),
                       20, "the admin told of the look-alike")  # fmt: skip
        assert HOMOGLYPH not in [r["name"] for r in _members(bob)]
        mallory = _join_by_invite(c, "mallory", code, url)
        mallory_id = carol_id(mallory)

        # 2. her own node refuses to rename her alice, or a look-alike of alice
        for wanted in ("alice", HOMOGLYPH, "Alice"):
            errors_before = len(mallory.select("error"))
            mallory.send(f"/nick {wanted}")
            mallory.wait_for(lambda n=errors_before: len(mallory.select("error")) > n, 20,
                             f"/nick {wanted} refused")  # fmt: skip
            assert "looks like" in mallory.select("error")[-1]["message"]
        mallory.send("first line")
        _sees(bob, "first line")
        [seen] = _lines_of(bob, mallory_id, "first line")
        assert (seen["name"], seen["label"]) == ("mallory", "mallory")

        # 3. her node restarted with --name alice: every line claims "alice" inside
        mallory.close_stdin()
        assert mallory.wait(T(30)) == 0, mallory.tail()
        mallory = c.start([sys.executable, "-m", "app.cli", "join", "team", "--data-dir",
                           str(tmp_path / "mallory"), "--name", "alice", "--headless",
                           "--fast", "--relay", url], "mallory-as-alice")  # fmt: skip
        mallory.wait_for(lambda: bool(mallory.select("connection", state="connected")), 30,
                         "connected")  # fmt: skip
        mallory.send("claims to be alice")
        _sees(bob, "claims to be alice")
        _sees(alice, "claims to be alice")
        for p in (alice, bob):
            [seen] = _lines_of(p, mallory_id, "claims to be alice")
            assert (seen["name"], seen["label"]) == ("mallory", "mallory"), p.name

        # 4. she signs "rename alice" herself: refused by every member's fold. Her node
        # stops first: a running node that hears a line signed with its key that it did
        # not send stops as a copied data dir (app/members/device_copy.py)
        mallory.close_stdin()
        assert mallory.wait(T(30)) == 0, mallory.tail()
        _signed_rename(tmp_path / "mallory", "alice", url)
        for p in (alice, bob):
            p.wait_for(lambda p=p: _rename_refused(p, mallory_id), 30, "rename refused")
            assert not _renamed(p, mallory_id)
        # then a look-alike: applied, and told apart wherever it shows
        _signed_rename(tmp_path / "mallory", HOMOGLYPH, url)
        for p in (alice, bob):
            p.wait_for(lambda p=p: _renamed(p, mallory_id), 30, "the look-alike rename")
        mallory = c.start([sys.executable, "-m", "app.cli", "join", "team", "--data-dir",
                           str(tmp_path / "mallory"), "--headless", "--fast", "--relay", url],
                          "mallory-renamed")  # fmt: skip
        mallory.wait_for(lambda: bool(mallory.select("connection", state="connected")), 30,
                         "connected")  # fmt: skip
        mallory.send("after the rename")
        alice.send("the real alice")
        _sees(bob, "after the rename", "the real alice")
        [hers] = _lines_of(bob, mallory_id, "after the rename")
        [real] = _lines_of(bob, alice_id, "the real alice")
        assert hers["name"] == HOMOGLYPH
        assert hers["label"] == f"{HOMOGLYPH} ({mallory_id[:8]})"
        assert real["label"] == f"alice ({alice_id[:8]})"
        rows = {r["id"]: r for r in _members(bob)}
        assert rows[mallory_id]["label"] == hers["label"]
        assert rows[alice_id]["label"] == real["label"]
        # no line of hers, anywhere at bob, reads as alice's
        for e in bob.select("delivered"):
            if e.get("sender") == mallory_id:
                assert e["name"] != "alice" and e["label"] != real["label"], e
        hist = history(tmp_path / "bob", "team")
        assert hist, "bob's history is empty"
        for h in hist:
            if h["sender"] == mallory_id:
                assert h["name"] != "alice" and h["label"] != real["label"], h
        [line] = [h for h in hist if h["content"] == "after the rename"]
        assert line["label"] == hers["label"]
        assert os.path.exists(tmp_path / "bob")

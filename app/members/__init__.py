"""Members channels: who belongs to a channel, who administers it, and the keys they share.

A members channel has a member list and admins. Membership changes are signed
admin events carried as SDS content messages; every member replays them in the
channel's total order and ends with the same list (:mod:`app.members.roster`).
Each member encrypts what it sends with its own Megolm session and shares the
session key only with the current members (:mod:`app.members.group_keys`), so a
removed member reads nothing sent after the removal. Newcomers join with a
one-line invite code (:mod:`app.members.invite`); two members compare a safety
number to check each other's keys (:mod:`app.members.safety`).

Like the SDS core, the state here is testable without sockets: events and
``now`` in, decisions out.
"""

"""LAN gossip: zeroconf discovery, a flooding websocket mesh, and bridging to a relay.

* :mod:`net.lan.discovery` — advertise/browse ``_sdschat._tcp.local.``;
* :mod:`net.lan.gossip` — the mesh (seen cache, hop limit, no echo);
* :mod:`net.lan.transport` — both behind the node's transport interface;
* :mod:`net.lan.bridge` — LAN and relay at once, bridged;
* ``gossip.proto`` — the frames (``make proto`` regenerates ``gossip_pb2``).
"""

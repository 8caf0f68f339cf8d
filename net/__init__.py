"""What crosses a process boundary: envelopes, relay, LAN gossip, store protocol, in-memory network."""

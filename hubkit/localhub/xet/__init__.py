"""Xet: the protocol's hashes, the xorb and shard formats, verified storage and dedup, tokens, the CAS API."""

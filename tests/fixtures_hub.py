"""Fixtures: the local Hub and tiny models published to it."""

"""Fixtures: real TRL and verl training runs on the tiny model."""

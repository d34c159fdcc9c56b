"""Shared test setup. Fixtures live in one plugin module per area, registered here."""

pytest_plugins = ["fixtures_hub", "fixtures_runs"]

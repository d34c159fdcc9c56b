"""Shared test setup. Fixtures live in one plugin module per area, registered here.

`make test` runs the suite on two pytest-xdist workers, each module whole on one of them (``--dist
loadscope``), the longest modules handed out first by what earlier runs measured (`durations.py`;
``--no-loadscope-reorder`` keeps that order) so
that neither worker is left with a long tail. The costly session fixtures (verl's own run, a real TRL run)
are built once for both workers (`fixtures_runs.built_once`).
"""

pytest_plugins = ["fixtures_hub", "fixtures_runs", "durations"]

"""Framework-free reward components and group aggregation, with thin TRL and verl integrations."""

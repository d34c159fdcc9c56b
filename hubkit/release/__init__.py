"""A published release read back from the Hub (its manifest and reward, as data), for the commands that
work from a repo rather than a run directory (`hubkit reward show`, `hubkit space --repo-id`)."""

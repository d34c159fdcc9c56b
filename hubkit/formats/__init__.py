"""One reader or writer per file format: each module owns the layout of its files."""

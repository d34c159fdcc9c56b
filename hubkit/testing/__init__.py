"""Builders for hubkit's tests and benchmarks: synthetic run directories in the frameworks' own layouts
(`runs`). Nothing here is used by a push; it ships so that benchmarks and tests build runs one way."""

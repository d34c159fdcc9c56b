"""Builders for hubkit's tests and benchmarks: synthetic run directories in the frameworks' own layouts
(`runs`), and the adversarial completions a reward must survive (`rewards`). Nothing here is used by a
push; it ships so that benchmarks and tests build their inputs one way."""

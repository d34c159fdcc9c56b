"""Completions that attack a math-verify reward: huge powers, deep nesting, 100k-character strings, an
unclosed box. Each should cost a worker at most its timeout and score 0 against the gold "1"; the tests
check that, the benchmark times it."""

from __future__ import annotations

ADVERSARIAL_COMPLETIONS: tuple[str, ...] = (
    r"\boxed{9^{9^{9^{9}}}}",
    r"\boxed{10^{10^{10^{10}}}}",
    r"\boxed{(10^{6})!}",
    r"\boxed{" + r"\frac{" * 200 + "1" + "}{2}" * 200 + "}",
    r"\boxed{" + r"\sqrt{" * 300 + "2" + "}" * 300 + "}",
    r"\boxed{" + "+".join(f"x_{{{i}}}^{{{i}}}" for i in range(400)) + "}",
    "a" * 100_000 + r"\boxed{" + "1+" * 50_000 + "1}",
    r"\boxed{" + "{" * 100_000 + "}",  # never closed
    "7" * 100_000,
)

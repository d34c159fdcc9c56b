"""The seed's four GSM8K rewards on positive and negative cases, including multi-line reasoning."""

import pytest

from hubkit.rewards import gsm8k

GOOD = (
    "<reasoning>\nShe has 3 boxes.\nEach holds 24, so 3 * 24 = 72.\n</reasoning>\n<answer>\n72\n</answer>\n"
)
GOLD = "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n#### 72"


def test_correctness_positive_cases():
    completions = [
        GOOD,
        "<answer>\n1,000\n</answer>",  # commas removed
        "<answer>The answer is -3.50 dollars</answer>",  # last number, numeric comparison
        "<answer>wrong 5</answer> then <answer>\n72\n</answer>",  # last block wins
        "<answer>72.0</answer>",
    ]
    answers = [GOLD, "#### 1000", "-3.5", "72", 72]
    assert gsm8k.correctness(completions, answers) == [2.0] * 5


def test_correctness_negative_cases():
    completions = [
        "<reasoning>\n72\n</reasoning>",  # no answer block
        "<answer>\n71\n</answer>",
        "<answer>\nseventy-two\n</answer>",  # no number
        "<answer>\n72\n</answer> and later <answer>\n5\n</answer>",
        "72",
    ]
    assert gsm8k.correctness(completions, [GOLD] * 5) == [0.0] * 5


def test_gold_is_the_last_number_after_the_marks():
    assert gsm8k.extract_gold_answer("3 + 4 = 7 and 10 more\n#### 1,234") == 1234.0
    assert gsm8k.extract_gold_answer("no marks, last number 9 then 12") == 12.0
    assert gsm8k.extract_gold_answer("#### none") is None


def test_strict_format_accepts_multi_line_reasoning_and_surrounding_whitespace():
    assert gsm8k.strict_format([GOOD, "\n  " + GOOD + "  \n"]) == [0.5, 0.5]


@pytest.mark.parametrize(
    "completion",
    [
        "<reasoning>Step one.</reasoning>\n<answer>\n72\n</answer>",  # no newline after <reasoning>
        "<reasoning>\nok\n</reasoning>\n<answer>72</answer>",  # answer on the tag line
        "Sure! " + GOOD,  # text before
        GOOD + "Hope that helps.",  # text after
        "<reasoning>\nok\n</reasoning>\n\n<answer>\n72\n</answer>",  # blank line between blocks
    ],
)
def test_strict_format_negative(completion):
    assert gsm8k.strict_format([completion]) == [0.0]


def test_soft_format():
    positives = [
        GOOD,
        "Sure! <reasoning>line 1\nline 2</reasoning>   <answer>72</answer> done",  # text around, any spacing
        "<reasoning>a</reasoning><answer>\n7\n</answer>",
    ]
    negatives = [
        "<answer>72</answer><reasoning>late</reasoning>",  # wrong order
        "<reasoning>only reasoning</reasoning>",
        "<reasoning>a</reasoning> text <answer>72</answer>",  # something other than whitespace between
    ]
    assert gsm8k.soft_format(positives) == [0.5] * 3
    assert gsm8k.soft_format(negatives) == [0.0] * 3


def test_number_only():
    positives = [
        "<answer>\n72\n</answer>",
        "<answer> -3.5 </answer>",
        "<answer>1,000</answer>",
        "<answer>.5</answer>",
    ]
    negatives = [
        "<answer>\n72 apples\n</answer>",
        "<answer>$72</answer>",
        "<answer>\n\n</answer>",
        "no block 72",
        "<answer>72</answer> <answer>x = 72</answer>",  # the last block is not a plain number
    ]
    assert gsm8k.number_only(positives) == [0.5] * 4
    assert gsm8k.number_only(negatives) == [0.0] * 5


def test_lengths_must_match():
    with pytest.raises(ValueError, match="2 completions for 1 answers"):
        gsm8k.correctness(["a", "b"], ["1"])

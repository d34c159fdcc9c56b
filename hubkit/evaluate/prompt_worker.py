"""Renders prompts through a run's chat template in a process of its own (`hubkit.evaluate.chat.render_prompts`).

A chat template is code from the run or the release: transformers runs it in Jinja's sandbox, which stops
what it may touch but not how long it loops or how much it builds. Here it runs under a limit on the memory
it writes (1 GB; libraries' mapped code does not count) and its parent's timeout, so a template that loops
for ever or builds a huge string ends in one line of error.

    python -I prompt_worker.py TOKENIZER_DIR MAX_PROMPT_TOKENS REQUEST.json
    REQUEST.json: {"conversations": [[turns...], ...]}
    stdout: "ready" once the tokenizer is loaded, then {"ids": [[token ids], ...]};
            or exit 3 with the reason on stderr
"""

import json
import os
import resource
import sys

MEMORY_BYTES = 1024**3


def main(tokenizer_dir: str, max_tokens: int, request: str) -> None:
    resource.setrlimit(resource.RLIMIT_DATA, (MEMORY_BYTES, MEMORY_BYTES))
    # One prompt at a time needs no thread pool; each of its threads' stacks would count against the limit.
    os.environ["RAYON_NUM_THREADS"] = "1"
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    with open(request) as f:
        conversations = json.load(f)["conversations"]
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    ids = []
    for turns in conversations:
        prompt = tokenizer.apply_chat_template(
            turns, tokenize=True, add_generation_prompt=True, return_dict=False
        )
        if len(prompt) > max_tokens:
            sys.stderr.write(f"a prompt rendered to {len(prompt)} tokens, more than {max_tokens}\n")
            sys.exit(3)
        ids.append([int(i) for i in prompt])
    json.dump({"ids": ids}, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])

"""`make demo`: a GRPO run that visibly learns, published as a full release on a local Hub (CPU, about a minute).

    $ python -m hubkit.demo [--root demo-hub]        # DEMO_SPACE=0 skips the Space at the end

The story, one step each (`steps.STEPS`):

1. a base model: a tiny Qwen3 built from config and warmed up on arithmetic word problems, answering in
   the run's ``<reasoning>…</reasoning><answer>…</answer>`` format only some of the time (`base_model`);
2. the TRL recipe's GRPO with LoRA, its `--tiny` settings, on the seed's four GSM8K rewards: the format
   becomes the model's habit, and with it the answers that the correctness reward can read;
3. `hubkit eval` of the base and every checkpoint on held-out problems;
4. `hubkit push`: every checkpoint, the merged model, cards with curves and the eval, the Space;
5. a checkpoint loaded back with `PeftModel.from_pretrained`, answering beside the base model;
6. the held-out mean reward of the base and of the last checkpoint, then the Space on 127.0.0.1.

The problems ship with the package (`problems`, `data/`); nothing is downloaded. A second run on the
same root rebuilds the same base model and updates the same repos.
"""

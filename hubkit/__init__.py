"""hubkit: turn GRPO training runs (TRL, verl) into finished releases on the Hugging Face Hub.

The core (manifest, rewards, run readers) imports nothing heavy; publishing, merging, the Space and
the TRL recipe live behind extras and are imported lazily.
"""

__version__ = "0.1.0"

"""Adapters made ready to publish: each checkpoint's LoRA adapter read once, checked, normalized to PEFT's
form (`prepare`), checked against its base model (`base_check`), or rebuilt from verl's FSDP shards
(`verl_rebuild`). The file formats themselves are read by `hubkit.formats`."""

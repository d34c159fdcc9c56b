"""One reader and one writer per file format hubkit handles: the PEFT adapter (`peft`), safetensors
(`safetensors`) and verl's FSDP checkpoint shards (`fsdp`). Nothing here knows about runs or the Hub."""

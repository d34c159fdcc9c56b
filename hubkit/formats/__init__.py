"""One reader and one writer per file format hubkit handles: the PEFT adapter (`peft`), safetensors
(`safetensors`), verl's FSDP checkpoint shards (`fsdp`), bounded JSON (`json_file`) and tokenizer files
(`tokenizer`). Nothing here knows about runs or the Hub."""

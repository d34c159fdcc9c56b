"""One reader and one writer per file format hubkit handles: the PEFT adapter (`peft`), safetensors
(`safetensors`), verl's FSDP checkpoint shards (`fsdp`), bounded JSON (`json_file`), tokenizer files
(`tokenizer`), a Trainer's arguments (`training_args`), TensorBoard events (`tensorboard`), PNG (`png`),
bounded YAML (`yaml_file`) and GGUF (`gguf`, `gguf_arch`, `gguf_vocab`). Nothing here knows about runs or the Hub."""

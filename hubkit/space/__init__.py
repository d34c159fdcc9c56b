"""The comparison Space of a published run. The app itself lives in the top-level `spaces/compare/` (shipped
in the wheel) and never imports hubkit; this package writes what it reads: its configuration (`config`),
the files of its repo (`files`), and runs it locally (`serve`). The Space repo is `<repo_id>-demo` by
default; its suggested hardware is ZeroGPU, and the app also runs on a free CPU Space (bfloat16, one
adapter at a time)."""

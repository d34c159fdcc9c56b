"""What hubkit's tests and benchmarks build their inputs with, outside the package (nothing here ships):
synthetic run directories in the frameworks' own layouts (`runs`), the adversarial completions a reward must
survive (`rewards`), verl's own trainer on a CPU (`verl_cpu`), and the local Hub's failures on purpose
(`faults`, and `serve_faulty` for a Hub with them in a process of its own). Tests import it as ``tests.support``
(pytest puts the repository root on ``sys.path``); benchmarks put the root there themselves."""

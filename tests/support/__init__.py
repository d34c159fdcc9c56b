"""What hubkit's tests and benchmarks build their inputs with, outside the package (nothing here ships):
synthetic run directories in the frameworks' own layouts (`runs`), the adversarial completions a reward must
survive (`rewards`), and verl's own trainer on a CPU (`verl_cpu`). Tests import it as ``tests.support``
(pytest puts the repository root on ``sys.path``); benchmarks put the root there themselves."""

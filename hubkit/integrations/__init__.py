"""Training frameworks meeting hubkit: pushing from inside TRL (`trl.HubkitPushCallback`), and the file
verl 0.6.1's ``custom_reward_function.path`` points to (`verl_reward`: hubkit's reward manager and
advantage estimator)."""

"""Power control: a small NumPy PPO, control environments, baselines, evaluation."""

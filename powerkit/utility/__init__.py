"""What a fleet's power swings look like to the utility, and what smoothing them costs."""

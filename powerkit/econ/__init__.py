"""What the fleet's results are worth: economics (assumptions with sources), carbon, the
pilot plan."""

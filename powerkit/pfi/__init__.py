"""Per-job power flexibility: cap curves, the PFI, its prediction, and power allocation."""

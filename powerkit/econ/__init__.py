"""What oversubscription and control are worth: economics (and, later, carbon and pilots)."""

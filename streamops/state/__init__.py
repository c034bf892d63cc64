"""State inspection and verification: the truth oracle, changelog verification, rebuild."""

"""Operating apps: deciding (pure reconcile logic, scale windows) and doing (supervisor, operations)."""

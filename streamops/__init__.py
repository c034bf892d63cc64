"""streamops core package (never imports Airflow)."""
__version__ = "0.1.0"

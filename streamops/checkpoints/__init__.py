"""Spark checkpoint layout: offsets and commit logs, state, savepoints."""

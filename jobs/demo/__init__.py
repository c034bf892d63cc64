"""The demo app ``user_activity``: event contract, load generator and the truth oracle's fold."""

"""Observing the streams: the overview the Streams page, the metrics and the alerts share."""

"""Reset and reprocess: move an app's input offsets and state safely (see ``tool``)."""

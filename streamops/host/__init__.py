"""This machine: processes and their pid records, file locks, atomic files, failpoints, Java and the
pinned jars. Below everything that runs an app; knows nothing of apps."""

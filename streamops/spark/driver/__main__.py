"""``python -m streamops.spark.driver --app NAME ...``: the driver process (``main``)."""

from __future__ import annotations

import sys

from streamops.spark.driver.main import main

if __name__ == "__main__":
    sys.exit(main())

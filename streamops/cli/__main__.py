import sys

from streamops.cli import main

sys.exit(main())

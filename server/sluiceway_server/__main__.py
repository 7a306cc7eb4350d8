import sys

from sluiceway_server.main import main

sys.exit(main())

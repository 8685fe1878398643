"""Write openapi/openapi.json from the app (``--check``: fail when the file is out of date)."""

import sys

from service.api.document import main

if __name__ == "__main__":
    sys.exit(main())

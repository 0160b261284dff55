"""An app that takes ten minutes to import: a launch that is still starting."""

import time

time.sleep(600)
app = None

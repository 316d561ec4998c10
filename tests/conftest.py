import os

os.environ.setdefault("TESTING", "1")  # progress bars off

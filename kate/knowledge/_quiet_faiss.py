"""faiss's loader logs at INFO every CPU-specific build it tries and fails to load (one
``ModuleNotFoundError`` line each) on the ``faiss.loader`` logger: kept at WARNING, so that a job's
INFO logging (Hydra's, in every ``kate`` command) does not print them. ``kate.knowledge`` imports
this module first, before any of its modules imports faiss."""

import logging

logging.getLogger("faiss.loader").setLevel(logging.WARNING)

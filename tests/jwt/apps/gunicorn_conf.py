"""gunicorn settings as the deployment guide writes them: keys started in each worker."""

import importlib
import os


def post_fork(server, worker):
    # Under --preload the app module was imported in the master: each worker
    # starts its own key refresher (the master's thread is not the worker's).
    importlib.import_module(os.environ["TEST_APP_MODULE"]).verifier.start_sync()

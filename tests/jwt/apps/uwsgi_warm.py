"""Imported after examples/flask/orders.py under uWSGI: a verification where the app loads
(the master without lazy-apps), and the answering worker's pid in ``X-Worker``."""

import os

from orders import app, verifier

verifier.verify(os.environ["TEST_WARMUP"])


@app.after_request
def name_the_worker(response):
    response.headers["X-Worker"] = str(os.getpid())
    return response

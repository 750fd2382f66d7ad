"""gunicorn -c gunicorn.conf.py orders:app (docs/frameworks.md, "Deployment")."""

bind = "0.0.0.0:8000"
preload_app = True  # the app is imported once, in the master, then the workers fork
worker_class = "gthread"
workers = 3
threads = 4


def post_fork(server, worker):
    # The master's key refresher is a thread: a forked worker starts its own.
    from orders import verifier

    verifier.start_sync()

"""gunicorn -c gunicorn.conf.py orders.wsgi (docs/frameworks.md, "Deployment")."""

bind = "0.0.0.0:8000"
preload_app = True  # Django loads once, in the master, then the workers fork
worker_class = "gthread"
workers = 3
threads = 4


def post_fork(server, worker):
    # The master's key refresher is a thread: a forked worker starts its own.
    from orders.auth import verifier

    verifier.start_sync()

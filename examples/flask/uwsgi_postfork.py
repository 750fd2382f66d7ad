"""Each uWSGI worker starts its own key refresher after the fork (uwsgi.ini: import)."""

from uwsgidecorators import postfork


@postfork
def start_keys():
    from orders import verifier

    verifier.start_sync()

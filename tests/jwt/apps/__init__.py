"""Apps the integration tests serve under real servers (gunicorn, uvicorn)."""

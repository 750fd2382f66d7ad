"""Settings of the Django REST framework orders service (docs/frameworks.md)."""

import os

SECRET_KEY = os.environ["DJANGO_SECRET_KEY"]
DEBUG = False
ALLOWED_HOSTS = os.environ.get("DJANGO_ALLOWED_HOSTS", "localhost").split(",")
ROOT_URLCONF = "orders.urls"
WSGI_APPLICATION = "orders.wsgi.application"
INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth", "rest_framework"]
DATABASES: dict = {}  # a token service: no database

MIDDLEWARE = ["grelmicro.jwt.django.JWTMiddleware"]  # keys loaded with the app
GRELMICRO_JWT = {
    "VERIFIER": "orders.auth.verifier",
    "REALM": "orders",
    "ROLE_CLAIMS": "realm_access.roles",  # Keycloak's realm roles
}
REST_FRAMEWORK = {"DEFAULT_AUTHENTICATION_CLASSES": ["grelmicro.jwt.drf.JWTAuthentication"]}

"""A Django project in one file (plain views and DRF views), served by gunicorn in the tests."""

import os

import django
from django.conf import settings

from grelmicro.jwt import JWTVerifier

verifier = JWTVerifier(
    jwks_url=os.environ["TEST_JWKS_URL"], allow_insecure_loopback=True, audience="orders"
)

settings.configure(
    DEBUG=False,
    ALLOWED_HOSTS=["127.0.0.1"],
    ROOT_URLCONF=__name__,
    SECRET_KEY="test-only",
    INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth", "rest_framework"],
    MIDDLEWARE=["grelmicro.jwt.django.JWTMiddleware"],
    GRELMICRO_JWT={
        "VERIFIER": f"{__name__}.verifier",
        "REALM": "orders",
        "ROLE_CLAIMS": "realm_access.roles",
    },
    REST_FRAMEWORK={
        "DEFAULT_AUTHENTICATION_CLASSES": ["grelmicro.jwt.drf.JWTAuthentication"],
        "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
        "UNAUTHENTICATED_USER": None,
    },
)
django.setup()

from django.core.wsgi import get_wsgi_application  # noqa: E402
from django.http import JsonResponse  # noqa: E402
from django.urls import path  # noqa: E402
from rest_framework.response import Response  # noqa: E402
from rest_framework.views import APIView  # noqa: E402

from grelmicro.jwt.django import ready, require  # noqa: E402
from grelmicro.jwt.drf import require_roles, require_scopes  # noqa: E402


@require(scopes=["orders:read"], roles=["clerk"])
def orders(request):
    return JsonResponse({"owner": request.jwt_claims.subject})


class ApiOrders(APIView):
    permission_classes = (require_scopes("orders:read"), require_roles("clerk"))

    def get(self, request):
        return Response({"owner": request.auth.subject, "user": str(request.user)})


urlpatterns = [
    path("orders", orders),
    path("api/orders", ApiOrders.as_view()),
    path("ready", ready),
]

app = get_wsgi_application()

"""The API: request.auth is the verified token's Claims, request.user its TokenUser."""

from rest_framework.response import Response
from rest_framework.views import APIView

from grelmicro.jwt.drf import require_roles, require_scopes


class Orders(APIView):
    permission_classes = (require_scopes("orders:read"), require_roles("clerk"))

    def get(self, request):
        return Response({"owner": request.auth.subject, "orders": []})


class Refunds(APIView):
    permission_classes = (require_scopes("orders:write"), require_roles("manager"))

    def post(self, request):
        return Response({"refunded_by": str(request.user)}, status=201)

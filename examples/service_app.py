"""The service examples/Dockerfile ships: ``fastapi_service.build_app`` set up from the env.

``GRELMICRO_JWT_JWKS_URL`` names the issuer's key set (or
``GRELMICRO_JWT_DISCOVER`` its issuer); ``GRELMICRO_JWT_AUDIENCE``,
``GRELMICRO_JWT_ISSUER`` and the other ``GRELMICRO_JWT_*`` variables of the
guide are read by :meth:`JWTVerifier.from_env`. Each worker process
imports this module and builds its own verifier (docs/shipping.md).
"""

from fastapi_service import build_app

from grelmicro.jwt import JWTVerifier

verifier = JWTVerifier.from_env()
app = build_app(verifier)

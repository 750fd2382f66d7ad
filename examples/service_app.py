"""The service examples/Dockerfile ships: ``fastapi_service.build_app`` set up from the env.

``JWKS_URL`` names the issuer's key set; ``GRELMICRO_JWT_AUDIENCE``,
``GRELMICRO_JWT_ISSUER`` (and the other ``GRELMICRO_JWT_*`` policy
variables) are read by :meth:`JWTVerifier.from_env`. Each worker process
imports this module and builds its own verifier (docs/shipping.md).
"""

import os

from fastapi_service import build_app

from grelmicro.jwt import JWTVerifier

verifier = JWTVerifier.from_env(jwks_url=os.environ["JWKS_URL"])
app = build_app(verifier)

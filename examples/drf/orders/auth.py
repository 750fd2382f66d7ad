"""The verifier, from GRELMICRO_JWT_JWKS_URL (or _DISCOVER), _ISSUER and _AUDIENCE."""

from grelmicro.jwt import JWTVerifier

verifier = JWTVerifier.from_env()

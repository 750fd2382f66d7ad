"""Every Python lane: how each library is set up once and called per token.

A builder takes a case (algorithm, key, tokens) and returns lanes. Keys are
parsed here, once, outside the timed loop; each library gets the key in the
form it documents as the parsed, reusable one. A library that is not installed
in this interpreter gives a skipped lane, one that lacks the algorithm an
unsupported lane; neither is timed.
"""

from __future__ import annotations

# Each library is imported inside its own builder: an interpreter holds only
# some of them, and a missing one must skip its lanes, not the whole run.
# ruff: noqa: PLC0415
import base64
import hashlib
import hmac
import importlib.util
import json
import os
import sys
import time
import warnings
from collections.abc import Callable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from timing import Lane

warnings.simplefilter("ignore")

REFERENCE = "pyjwt"


def version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "?"


def secret_of(fx: dict, case: dict) -> bytes:
    return base64.b64decode(fx["keys"][case["key"]]["secret_b64"])


def material(fx: dict, case: dict) -> dict:
    return fx["keys"][case["key"]]


def is_hmac(case: dict) -> bool:
    return case["alg"].startswith("HS")


def crypto_public_key(fx: dict, case: dict) -> Any:
    from cryptography.hazmat.primitives.serialization import load_pem_public_key

    return load_pem_public_key(material(fx, case)["pem"].encode())


def skipped(lane_id: str, name: str, group: str, reason: str) -> Lane:
    return Lane(lane_id, name, group, status="skipped", reason=reason)


def mapping_of(value: Any) -> dict:
    if isinstance(value, Mapping):
        return dict(value)
    for attr in ("to_dict", "as_dict", "model_dump"):
        fn = getattr(value, attr, None)
        if callable(fn):
            return dict(fn())
    return dict(value)


# --------------------------------------------------------------------- floors


def b64_json(tok: str) -> Any:
    payload = tok.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def floor_lanes(case: dict, fx: dict) -> list[Lane]:
    lanes = [
        Lane("floor-loop", "floor: loop + bytes.decode()", "floor", "tok", checks="none"),
        Lane(
            "floor-b64json",
            "floor: base64 + json.loads (no signature)",
            "floor",
            "b64_json(tok)",
            {"b64_json": b64_json},
            checks="claims",
        ),
        Lane(
            "floor-hashlib",
            "floor: SHA-256 of the token (hashlib)",
            "floor",
            "sha256(tok.encode()).digest()",
            {"sha256": hashlib.sha256},
            checks="none",
        ),
    ]
    lanes.append(signature_floor(case, fx))
    return lanes


def _split(token: str) -> tuple[bytes, bytes]:
    head, sig = token.rsplit(".", 1)
    return head.encode(), base64.urlsafe_b64decode(sig + "=" * (-len(sig) % 4))


def signature_floor(case: dict, fx: dict) -> Lane:
    """The signature check alone, on pre-split bytes, with cryptography (OpenSSL)."""
    lane_id, name = "floor-sig", f"floor: signature only (cryptography {version('cryptography')})"
    try:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec, padding
        from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
    except ImportError as exc:
        return skipped(lane_id, name, "floor", f"cryptography not installed ({exc})")
    alg = case["alg"]
    bits = alg[2:]
    msg, sig = _split(case["tokens"]["valid"])
    _, bad = _split(case["tokens"]["tampered"])
    names: dict[str, Any]
    if alg.startswith("HS"):
        secret = secret_of(fx, case)
        expr = "ok(digest(key, msg, h), sig) or fail()"
        names = {"ok": hmac.compare_digest, "digest": hmac.digest, "key": secret}
        names["h"] = f"sha{bits}"

        def fail() -> None:
            raise ValueError("bad signature")

        names["fail"] = fail
    else:
        pub = crypto_public_key(fx, case)
        hash_ = {"256": hashes.SHA256, "384": hashes.SHA384, "512": hashes.SHA512}.get(bits)
        if alg.startswith("RS"):
            expr = "verify(sig, msg, pad, h)"
            names = {"verify": pub.verify, "pad": padding.PKCS1v15(), "h": hash_()}
        elif alg.startswith("PS"):
            pss = padding.PSS(mgf=padding.MGF1(hash_()), salt_length=int(bits) // 8)
            expr = "verify(sig, msg, pad, h)"
            names = {"verify": pub.verify, "pad": pss, "h": hash_()}
        elif alg.startswith("ES"):
            half = len(sig) // 2

            def der(raw: bytes) -> bytes:
                r, s = int.from_bytes(raw[:half], "big"), int.from_bytes(raw[half:], "big")
                return encode_dss_signature(r, s)

            sig, bad = der(sig), der(bad)
            expr = "verify(sig, msg, h)"
            names = {"verify": pub.verify, "h": ec.ECDSA(hash_())}
        else:
            expr = "verify(sig, msg)"
            names = {"verify": pub.verify}
    lane = Lane(lane_id, name, "floor", expr, dict(names, sig=sig, msg=msg), checks="none")
    lane.note = "pre-split signing input and signature; ES signature pre-converted to DER"
    lane.compile()
    probe = Lane(lane_id, name, "floor", expr, dict(names, sig=bad, msg=msg))
    probe.compile()
    try:
        lane.once(b"")
    except Exception as exc:
        lane.status, lane.reason = "failed", f"valid signature refused: {exc!r}"[:200]
        return lane
    try:
        probe.once(b"")
    except Exception:
        return lane
    lane.status, lane.reason = "failed", "accepted a tampered signature"
    return lane


# ------------------------------------------------------------------ grelmicro


def grelmicro_core_lanes(case: dict, fx: dict) -> list[Lane]:
    try:
        import grelmicro_core as gcore
    except ImportError as exc:
        return [skipped("grelmicro-core", "grelmicro core", "grelmicro", str(exc))]
    verifier = core_verifier(gcore, case, fx, source="pem")
    return [
        Lane(
            "grelmicro-core",
            f"grelmicro core {gcore.__version__} (Verifier.verify)",
            "grelmicro",
            "verify(tok, now())",
            {"verify": verifier.verify, "now": time.time},
        ),
        Lane(
            "floor-sha-core",
            "floor: SHA-256 of the token (core sha256_digest)",
            "floor",
            "sha(tok)",
            {"sha": gcore.sha256_digest},
            checks="none",
        ),
    ]


def core_verifier(gcore: Any, case: dict, fx: dict, source: str) -> Any:
    alg = case["alg"]
    mat = material(fx, case)
    if source == "jwks":
        keys = gcore.KeySet.from_jwks(
            json.dumps({"keys": [dict(mat["jwk"], alg=alg)]}), allow_symmetric=True
        )
    elif source == "jwk":
        key = gcore.Key.jwk(json.dumps(dict(mat["jwk"], alg=alg)), allow_symmetric=True)
        keys = gcore.KeySet([key])
    elif is_hmac(case):
        keys = gcore.KeySet([gcore.Key.secret(secret_of(fx, case), alg, kid=fx["kid"])])
    else:
        keys = gcore.KeySet([gcore.Key.pem(mat["pem"].encode(), alg, kid=fx["kid"])])
    policy = gcore.Policy(
        audience=[fx["audience"]], issuer=[fx["issuer"]], max_token_size=case["max_token_size"]
    )
    return gcore.Verifier(keys, policy)


def layer_available() -> str | None:
    """None when ``grelmicro.jwt`` can be used, else why not."""
    try:
        from grelmicro.jwt import JWTVerifier, Key  # noqa: F401
    except Exception as exc:
        return f"grelmicro.jwt not importable yet ({type(exc).__name__}: {exc})"[:200]
    return None


def layer_accepts(option: str) -> bool:
    import inspect

    from grelmicro.jwt import JWTVerifier

    return option in inspect.signature(JWTVerifier).parameters


def layer_verifier(case: dict, fx: dict, source: str = "keys", **options: Any) -> Any:
    from grelmicro.jwt import JWTVerifier, Key

    alg = case["alg"]
    mat = material(fx, case)
    kwargs: dict[str, Any] = {"audience": fx["audience"], "issuer": fx["issuer"]}
    if case["max_token_size"] != 8192:
        kwargs["max_token_size"] = case["max_token_size"]
    if source == "jwks":
        kwargs["jwks"] = {"keys": [dict(mat["jwk"], alg=alg)]}
        if is_hmac(case):
            kwargs["allow_symmetric"] = True
    elif source == "jwks_url":
        kwargs["jwks_url"] = options.pop("url")
        kwargs["allow_insecure_loopback"] = True
    elif is_hmac(case):
        kwargs["keys"] = [Key.secret(secret_of(fx, case), algorithm=alg, kid=fx["kid"])]
    else:
        kwargs["keys"] = [Key.pem(mat["pem"].encode(), algorithm=alg, kid=fx["kid"])]
    kwargs.update(options)
    return JWTVerifier(**kwargs)


LAYER_LANES = [
    ("grelmicro-full", "grelmicro full verify (cache off)", {"cache_size": 0}),
    ("grelmicro-hit-digest", "grelmicro cache hit (digest key)", {"cache_key": "digest"}),
    ("grelmicro-hit-token", "grelmicro cache hit (token key)", {"cache_key": "token"}),
]


def grelmicro_layer_lanes(case: dict, fx: dict) -> list[Lane]:
    why = layer_available()
    if why is not None:
        return [skipped(lane_id, name, "grelmicro", why) for lane_id, name, _ in LAYER_LANES]
    lanes = []
    for lane_id, name, options in LAYER_LANES:
        opts = dict(options)
        if "cache_key" in opts:
            opts["cache_size"] = 1024
        try:
            verifier = layer_verifier(case, fx, **opts)
        except Exception as exc:
            lanes.append(
                Lane(lane_id, name, "grelmicro", status="failed", reason=f"build: {exc!r}"[:200])
            )
            continue
        lanes.append(
            Lane(lane_id, name, "grelmicro", "verify(tok)", {"verify": verifier.verify}, mapping_of)
        )
    return lanes


# ---------------------------------------------------------------------- peers


def pyjwt_lane(case: dict, fx: dict, module: Any, lane_id: str, ver: str, group: str) -> Lane:
    key = secret_of(fx, case) if is_hmac(case) else crypto_public_key(fx, case)
    return Lane(
        lane_id,
        f"PyJWT {ver}",
        group,
        "decode(tok, key, algorithms=algs, audience=aud, issuer=iss)",
        {
            "decode": module.decode,
            "key": key,
            "algs": [case["alg"]],
            "aud": fx["audience"],
            "iss": fx["issuer"],
        },
        reference=lane_id == REFERENCE,
    )


def pyjwt_lanes(case: dict, fx: dict) -> list[Lane]:
    try:
        import jwt
    except ImportError as exc:
        return [skipped(REFERENCE, "PyJWT", "reference", str(exc))]
    return [pyjwt_lane(case, fx, jwt, REFERENCE, jwt.__version__, "reference")]


_PYJWT_OLD: dict[str, Any] = {}


def load_pyjwt_old() -> Any:
    """PyJWT 2.13 from a side folder, imported as ``jwt_old`` (its imports are relative)."""
    if "mod" in _PYJWT_OLD:
        return _PYJWT_OLD["mod"]
    folder = os.environ.get("BENCH_PYJWT_OLD")
    mod = None
    if folder and (Path(folder) / "jwt" / "__init__.py").exists():
        root = Path(folder) / "jwt"
        spec = importlib.util.spec_from_file_location(
            "jwt_old", root / "__init__.py", submodule_search_locations=[str(root)]
        )
        mod = importlib.util.module_from_spec(spec)
        sys.modules["jwt_old"] = mod
        spec.loader.exec_module(mod)
    _PYJWT_OLD["mod"] = mod
    return mod


def pyjwt_old_lanes(case: dict, fx: dict) -> list[Lane]:
    mod = load_pyjwt_old()
    if mod is None:
        return [skipped("pyjwt-old", "PyJWT (older)", "peer", "BENCH_PYJWT_OLD not set")]
    return [pyjwt_lane(case, fx, mod, "pyjwt-old", mod.__version__, "peer")]


def joserfc_lanes(case: dict, fx: dict) -> list[Lane]:
    name = f"joserfc {version('joserfc')}"
    try:
        from joserfc import jwt
        from joserfc.jwk import ECKey, OctKey, OKPKey, RSAKey
    except ImportError as exc:
        return [skipped("joserfc", name, "peer", str(exc))]
    mat = material(fx, case)
    key_class = {"hmac": OctKey, "rsa": RSAKey, "ec": ECKey, "okp": OKPKey}[mat["kind"]]
    key = key_class.import_key(secret_of(fx, case) if is_hmac(case) else mat["pem"])
    registry = jwt.JWTClaimsRegistry(
        iss={"essential": True, "value": fx["issuer"]},
        aud={"essential": True, "value": fx["audience"]},
        exp={"essential": True},
    )
    algs = [case["alg"]]

    def verify(tok: str) -> dict:
        token = jwt.decode(tok, key, algorithms=algs)
        registry.validate(token.claims)
        return token.claims

    return [Lane("joserfc", name, "peer", "verify(tok)", {"verify": verify})]


def authlib_lanes(case: dict, fx: dict) -> list[Lane]:
    name = f"Authlib {version('authlib')}"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from authlib.jose import JsonWebKey, JsonWebToken
    except ImportError as exc:
        return [skipped("authlib", name, "peer", str(exc))]
    mat = material(fx, case)
    if is_hmac(case):
        key = JsonWebKey.import_key(secret_of(fx, case), {"kty": "oct"})
    else:
        kty = {"rsa": "RSA", "ec": "EC", "okp": "OKP"}[mat["kind"]]
        key = JsonWebKey.import_key(mat["pem"], {"kty": kty})
    decoder = JsonWebToken([case["alg"]])
    options = {
        "iss": {"essential": True, "value": fx["issuer"]},
        "aud": {"essential": True, "value": fx["audience"]},
        "exp": {"essential": True},
    }

    def verify(tok: str) -> dict:
        claims = decoder.decode(tok, key, claims_options=options)
        claims.validate()
        return claims

    return [Lane("authlib", name, "peer", "verify(tok)", {"verify": verify}, to_dict=dict)]


def jwcrypto_lanes(case: dict, fx: dict) -> list[Lane]:
    name = f"jwcrypto {version('jwcrypto')}"
    try:
        from jwcrypto import jwk
        from jwcrypto import jwt as jjwt
    except ImportError as exc:
        return [skipped("jwcrypto", name, "peer", str(exc))]
    mat = material(fx, case)
    key = jwk.JWK(**mat["jwk"]) if is_hmac(case) else jwk.JWK.from_pem(mat["pem"].encode())
    algs = [case["alg"]]
    check_claims = {"iss": fx["issuer"], "aud": fx["audience"], "exp": None}
    loads = json.loads

    def verify(tok: str) -> dict:
        token = jjwt.JWT(jwt=tok, key=key, algs=algs, check_claims=check_claims)
        return loads(token.claims)

    return [Lane("jwcrypto", name, "peer", "verify(tok)", {"verify": verify})]


def python_jose_lanes(case: dict, fx: dict) -> list[Lane]:
    name = f"python-jose {version('python-jose')}"
    try:
        from jose import jwk
        from jose import jwt as jjwt
    except ImportError as exc:
        return [skipped("python-jose", name, "peer", str(exc))]
    alg = case["alg"]
    if alg == "EdDSA":
        return [Lane("python-jose", name, "peer", status="unsupported", reason="no EdDSA")]
    mat = material(fx, case)
    try:
        key = jwk.construct(secret_of(fx, case) if is_hmac(case) else mat["pem"], alg)
    except Exception as exc:
        return [Lane("python-jose", name, "peer", status="unsupported", reason=repr(exc)[:200])]
    return [
        Lane(
            "python-jose",
            name,
            "peer",
            "decode(tok, key, algorithms=algs, audience=aud, issuer=iss)",
            {
                "decode": jjwt.decode,
                "key": key,
                "algs": [alg],
                "aud": fx["audience"],
                "iss": fx["issuer"],
            },
        )
    ]


def pyjwt_rs_lanes(case: dict, fx: dict) -> list[Lane]:
    name = f"pyjwt-rs {version('pyjwt-rs')}"
    try:
        import jwt_rs
    except ImportError as exc:
        return [skipped("pyjwt-rs", name, "peer", str(exc))]
    if is_hmac(case):
        key: Any = secret_of(fx, case)
        note = ""
    else:
        # PEM text is its fastest form (it keeps the parsed key); measured here,
        # its PyJWK object was ~7x and a cryptography key ~2x slower per call.
        key = material(fx, case)["pem"]
        note = "key given as PEM text, its fastest form (parsed key kept by the library)"
    lane = Lane(
        "pyjwt-rs",
        name,
        "peer",
        "decode(tok, key, algorithms=algs, audience=aud, issuer=iss)",
        {
            "decode": jwt_rs.decode,
            "key": key,
            "algs": [case["alg"]],
            "aud": fx["audience"],
            "iss": fx["issuer"],
        },
    )
    lane.note = note
    return [lane]


_STRUCT: dict[str, Any] = {}


def claims_struct() -> Any:
    if "cls" not in _STRUCT:
        import msgspec

        class Claims(msgspec.Struct, frozen=True):
            iss: str
            sub: str
            aud: str
            iat: int
            nbf: int
            exp: int
            jti: str
            scope: str
            email: str
            name: str
            roles: list[str]
            permissions: list[str] = []

        _STRUCT["cls"] = Claims
    return _STRUCT["cls"]


def ryjwt_lanes(case: dict, fx: dict) -> list[Lane]:
    ver = version("ryjwt")
    try:
        import ryjwt
    except ImportError as exc:
        return [
            skipped("ryjwt", f"ryjwt {ver} → dict", "peer", str(exc)),
            skipped("ryjwt-struct", f"ryjwt {ver} → msgspec Struct", "peer", str(exc)),
        ]
    common = {"algorithms": [case["alg"]], "audience": fx["audience"], "issuer": fx["issuer"]}
    if is_hmac(case):
        key = ryjwt.SecretKey(secret_of(fx, case), **common)
    else:
        key = ryjwt.PublicKey(material(fx, case)["pem"], **common)
    lanes = [Lane("ryjwt", f"ryjwt {ver} → dict", "peer", "decode(tok)", {"decode": key.decode})]
    try:
        import msgspec

        cls = claims_struct()
    except ImportError as exc:
        lanes.append(skipped("ryjwt-struct", f"ryjwt {ver} → msgspec Struct", "peer", str(exc)))
        return lanes
    fields = tuple(f for f in cls.__struct_fields__ if f in case["payload"])
    lanes.append(
        Lane(
            "ryjwt-struct",
            f"ryjwt {ver} → msgspec Struct",
            "peer",
            "decode(tok, into=cls)",
            {"decode": key.decode, "cls": cls},
            to_dict=msgspec.structs.asdict,
            fields=fields,
        )
    )
    return lanes


BUILDERS: list[Callable[[dict, dict], list[Lane]]] = [
    floor_lanes,
    grelmicro_core_lanes,
    grelmicro_layer_lanes,
    pyjwt_lanes,
    pyjwt_old_lanes,
    pyjwt_rs_lanes,
    ryjwt_lanes,
    joserfc_lanes,
    authlib_lanes,
    jwcrypto_lanes,
    python_jose_lanes,
]


def build_lanes(case: dict, fx: dict, only: set[str] | None = None) -> list[Lane]:
    lanes: list[Lane] = []
    for builder in BUILDERS:
        lane_id = builder.__name__.removesuffix("_lanes").replace("_", "-")
        try:
            built = builder(case, fx)
        except ImportError as exc:  # e.g. PyJWT without its RSA/EC backend
            built = [Lane(lane_id, lane_id, "peer", status="unsupported", reason=str(exc))]
        except Exception as exc:
            reason = f"setup: {exc!r}"[:300]
            built = [Lane(lane_id, lane_id, "peer", status="failed", reason=reason)]
        lanes.extend(built)
    if only is not None:
        lanes = [lane for lane in lanes if lane.id in only]
    return lanes

"""Swagger UI's *Authorize* button, clicked in a real browser (issue 39).

Headless Chromium (Debian's ``/usr/bin/chromium``) driven by Playwright
opens ``/docs`` of a FastAPI app served by uvicorn on 127.0.0.1, guarded by
:class:`JWTBearer` with a :class:`SwaggerLogin`. The identity provider is
the certified npm package ``oidc-provider`` (``tests/oidc/login-provider.mjs``)
on 127.0.0.1: authorize and token endpoints, PKCE required of the public
client, JWT access tokens, CORS on the token endpoint for the app's origin.
The browser ticks one scope, signs in at the provider's login page in the
popup, comes back through ``/docs/oauth2-redirect``, and then *Try it out* →
*Execute* sends the token to the guarded routes.

Two providers: a generic OpenID Connect provider (``scope: "orders:read"``
in the token) and one shaped like Entra ID (the authorize request asks for
``api://orders-api/Orders.Read``; the token carries ``scp: "Orders.Read"``,
``tid``, the API's application id as ``aud``; endpoints under
``/<tenant>/oauth2/v2.0/``, built by :meth:`SwaggerLogin.entra`).

Swagger UI's files come from the npm package ``swagger-ui-dist`` (pinned in
``tests/oidc/package-lock.json``): the browser's requests for FastAPI's CDN
URLs are answered from it, and every other request off 127.0.0.1 is aborted.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from fastapi import FastAPI, Security
from playwright import sync_api
from servers import Running
from support import HANG_GUARD

from grelmicro.jwt import Claims, JWTVerifier
from grelmicro.jwt.fastapi import JWTBearer, SwaggerLogin

OIDC = Path(__file__).resolve().parent.parent / "oidc"
SWAGGER_DIST = OIDC / "node_modules" / "swagger-ui-dist"
CHROMIUM = "/usr/bin/chromium"
# Chromium as the machine allows it: no sandbox (root), nothing fetched in the background.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
CDN = "https://cdn.jsdelivr.net/npm/swagger-ui-dist@5/"
CLIENT_ID = "swagger-ui"
TENANT = "0f6b3c4e-2a1d-4c8b-9e7f-1a2b3c4d5e6f"
# A browser step waits this long at most (ms): far beyond a normal run, short of a hang.
STEP_MS = 15_000

if shutil.which("node") is None or not Path(CHROMIUM).exists():
    pytest.skip(
        "NODE OR CHROMIUM IS MISSING: the Swagger UI login did not run in a browser "
        "(bash scripts/prereqs.sh oidc installs both)",
        allow_module_level=True,
    )



@dataclass(frozen=True)
class Shape:
    """One provider's shape: what the app is told and what the tokens carry."""

    name: str
    tenant: str | None
    resource: str  # the API, as the provider's resource indicator
    audience: str  # the token's aud
    read: str  # the scope a route checks (as the token carries it)
    write: str
    request: dict[str, str]  # scope of the authorize request -> its short name

    def login(self, origin: str) -> SwaggerLogin:
        descriptions = {"read": "Read orders", "write": "Place orders"}
        if self.tenant is not None:
            return SwaggerLogin.entra(
                self.tenant,
                client_id=CLIENT_ID,
                api=self.resource,
                scopes={self.read: descriptions["read"], self.write: descriptions["write"]},
                authority=origin,
            )
        return SwaggerLogin(
            authorization_url=f"{origin}/auth",
            token_url=f"{origin}/token",
            client_id=CLIENT_ID,
            scopes={self.read: descriptions["read"], self.write: descriptions["write"]},
        )


GENERIC = Shape(
    name="generic",
    tenant=None,
    resource="https://orders.example",
    audience="https://orders.example",
    read="orders:read",
    write="orders:write",
    request={"orders:read": "orders:read", "orders:write": "orders:write"},
)
ENTRA = Shape(
    name="entra",
    tenant=TENANT,
    resource="api://orders-api",
    audience="6e74c1c0-1f2b-4c3d-8e9f-0a1b2c3d4e5f",  # the API's application (client) id
    read="Orders.Read",
    write="Orders.Write",
    request={
        "api://orders-api/Orders.Read": "Orders.Read",
        "api://orders-api/Orders.Write": "Orders.Write",
    },
)


class LoginProvider:
    """``tests/oidc/login-provider.mjs``: oidc-provider with one public client."""

    def __init__(self, shape: Shape, redirect_uri: str) -> None:
        if not (OIDC / "node_modules" / "oidc-provider").is_dir():
            pytest.fail("oidc-provider is not installed: run `bash scripts/prereqs.sh oidc`")
        settings = {
            "clientId": CLIENT_ID,
            "redirectUri": redirect_uri,
            "resource": shape.resource,
            "audience": shape.audience,
            "scopes": list(shape.request),
            "tenant": shape.tenant,
        }
        self.process = subprocess.Popen(
            ["node", str(OIDC / "login-provider.mjs"), json.dumps(settings)],
            cwd=OIDC,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,  # its warnings about development-only settings
            text=True,
        )
        assert self.process.stdout is not None
        hello = json.loads(self.process.stdout.readline())
        self.origin: str = hello["origin"]
        self.issuer: str = hello["issuer"]

    def stop(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(HANG_GUARD)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
            assert self.process.stdout is not None
            self.process.stdout.close()


def orders_app(shape: Shape, provider: LoginProvider) -> FastAPI:
    """The app of the docs recipe: the login's scheme on the bearer, two scoped routes."""
    login = shape.login(provider.origin)
    verifier = JWTVerifier(
        discover=provider.issuer, audience=shape.audience, allow_insecure_loopback=True
    )
    auth = JWTBearer(verifier, security_scheme=login.security_scheme())
    app = FastAPI(swagger_ui_init_oauth=login.init_oauth())
    auth.install(app)
    reader = Security(auth, scopes=[shape.read])
    writer = Security(auth, scopes=[shape.write])

    @app.get("/orders")
    def list_orders(claims: Claims = reader) -> dict[str, Any]:
        return {"sub": claims.subject, "scopes": sorted(claims.scopes)}

    @app.post("/orders")
    def place_order(claims: Claims = writer) -> dict[str, Any]:
        return {"sub": claims.subject}

    return app


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@dataclass
class Served:
    shape: Shape
    provider: LoginProvider
    url: str


@pytest.fixture(params=[GENERIC, ENTRA], ids=lambda shape: shape.name)
def served(request: pytest.FixtureRequest) -> Iterator[Served]:
    shape: Shape = request.param
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    provider = LoginProvider(shape, f"{url}/docs/oauth2-redirect")
    try:
        running = Running(orders_app(shape, provider), listener)
        assert running.start(), f"application failed to start: {running.error!r}"
        try:
            yield Served(shape, provider, url)
        finally:
            running.stop()
    finally:
        listener.close()
        provider.stop()


def swagger_file(route: Any) -> None:
    """Answer the browser: Swagger UI from the npm package, 127.0.0.1 as is, nothing else."""
    url = route.request.url
    if url.startswith(CDN):
        name = urlsplit(url).path.rsplit("/", 1)[-1]
        types = {"js": "text/javascript", "css": "text/css"}
        route.fulfill(
            path=str(SWAGGER_DIST / name), content_type=types[name.rsplit(".", 1)[-1]]
        )
    elif urlsplit(url).hostname == "127.0.0.1":
        route.continue_()
    else:
        route.abort()


def payload_of(token: str) -> dict[str, Any]:
    """The claims of a JWT, read without verifying (the app verified it)."""
    part = token.split(".")[1]
    decoded: dict[str, Any] = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    return decoded


def test_authorize_logs_in_with_pkce_and_the_token_opens_the_route(
    browser: Any, served: Served
) -> None:
    shape = served.shape
    login = shape.login(served.provider.origin)
    context = browser.new_context()
    context.set_default_timeout(STEP_MS)
    context.route("**/*", swagger_file)
    sent: list[Any] = []
    context.on("request", lambda request: sent.append(request))
    try:
        page = context.new_page()
        page.goto(f"{served.url}/docs")
        page.locator("button.authorize").first.click()
        dialog = page.locator(".modal-ux")
        full_read = next(name for name, short in shape.request.items() if short == shape.read)
        full_write = next(name for name, short in shape.request.items() if short == shape.write)
        # Both ticked at first (init_oauth); the user keeps only the read scope.
        write_box = dialog.locator(f'input[data-value="{full_write}"]')
        dialog.locator(f'label[for="{write_box.get_attribute("id")}"]').click()
        assert not write_box.is_checked()
        with page.expect_popup() as opened:
            dialog.get_by_role("button", name="Apply given OAuth2 credentials").click()
        popup = opened.value
        popup.fill('input[name="login"]', "alice")
        popup.fill('input[name="password"]', "any password")
        with page.expect_response(lambda r: r.url == login.token_url) as token_answer:
            popup.click('button[type="submit"]')  # sign in
            popup.click('button[type="submit"]')  # the consent page: Continue
        assert token_answer.value.status == 200
        token = token_answer.value.json()["access_token"]
        dialog.get_by_role("button", name="Remove authorization").wait_for()
        dialog.locator("button.btn-done").click()

        def execute(method: str) -> Any:
            block = page.locator(f".opblock-{method.lower()}").filter(has_text="/orders")
            block.locator(".opblock-summary").click()
            block.get_by_role("button", name="Try it out").click()
            with page.expect_response(
                lambda r: r.url == f"{served.url}/orders" and r.request.method == method
            ) as answer:
                block.get_by_role("button", name="Execute").click()
            # What the page shows is what the server answered.
            shown = block.locator(".live-responses-table .response .response-col_status")
            assert shown.inner_text().split()[0] == str(answer.value.status)
            return answer.value.request.headers["authorization"], answer.value.status, answer.value.json()

        read = execute("GET")
        write = execute("POST")
    finally:
        context.close()

    authorize = next(r for r in sent if r.url.startswith(login.authorization_url + "?"))
    asked = {k: v[0] for k, v in parse_qs(urlsplit(authorize.url).query).items()}
    assert asked["code_challenge_method"] == "S256"
    assert asked["scope"] == full_read
    assert asked["client_id"] == CLIENT_ID
    assert asked["response_type"] == "code"
    exchange = next(r for r in sent if r.url == login.token_url and r.method == "POST")
    form = {k: v[0] for k, v in parse_qs(exchange.post_data).items()}
    assert "client_secret" not in form
    verifier_digest = hashlib.sha256(form["code_verifier"].encode()).digest()
    challenge = base64.urlsafe_b64encode(verifier_digest).rstrip(b"=").decode()
    assert challenge == asked["code_challenge"]

    claims = payload_of(token)
    assert claims["aud"] == shape.audience
    assert claims["sub"] == "alice"
    if shape.tenant is not None:
        assert claims["scp"] == shape.read
        assert "scope" not in claims
        assert claims["tid"] == shape.tenant
    else:
        assert claims["scope"] == shape.read

    bearer = f"Bearer {token}"
    assert read == (bearer, 200, {"sub": "alice", "scopes": [shape.read]})
    assert write[:2] == (bearer, 403)
    assert write[2]["reason"] == "insufficient-scope"

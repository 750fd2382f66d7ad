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
``/<tenant>/oauth2/v2.0/``, built by :meth:`SwaggerLogin.entra`; the app
verifies with ``providers.entra``, the provider's origin as its authority).
The generic provider issues a JWT for the API only when the authorize
request names it (``resource``, RFC 8707), through ``authorize_params``.

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

from grelmicro.jwt import Claims, JWTVerifier, providers
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
    """One provider's shape: what the app is told and what its tokens carry."""

    name: str
    tenant: str | None  # Entra ID's shape when set
    resource: str  # the API, as the provider's resource indicator
    audience: str  # the token's aud
    prefix: str  # before a scope's short name in the authorize request
    read: str  # the short scope names, as the token carries them and routes check them
    write: str

    def asked(self, short: str) -> str:
        """The scope name of the authorize request."""
        return self.prefix + short

    def login(self, origin: str) -> SwaggerLogin:
        """The docs recipe's login for this provider, served at ``origin``."""
        scopes = {self.read: "Read orders", self.write: "Place orders"}
        if self.tenant is not None:
            return SwaggerLogin.entra(
                self.tenant, client_id=CLIENT_ID, api=self.resource, scopes=scopes, authority=origin
            )
        return SwaggerLogin(
            authorization_url=f"{origin}/auth",
            token_url=f"{origin}/token",
            client_id=CLIENT_ID,
            scopes=scopes,
            authorize_params={"resource": self.resource},  # RFC 8707: a JWT for this API
        )


GENERIC = Shape(
    name="generic",
    tenant=None,
    resource="https://orders.example",
    audience="https://orders.example",
    prefix="",
    read="orders:read",
    write="orders:write",
)
ENTRA = Shape(
    name="entra",
    tenant=TENANT,
    resource="api://orders-api",  # the API's Application ID URI
    audience="6e74c1c0-1f2b-4c3d-8e9f-0a1b2c3d4e5f",  # its application (client) id: v2 tokens
    prefix="api://orders-api/",
    read="Orders.Read",
    write="Orders.Write",
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
            "scopes": [shape.asked(shape.read), shape.asked(shape.write)],
            "tenant": shape.tenant,
        }
        self.process = subprocess.Popen(
            ["node", str(OIDC / "login-provider.mjs"), json.dumps(settings)],
            cwd=OIDC,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,  # stderr: pytest's capture, shown when a test fails
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line, f"login-provider.mjs exited ({self.process.wait(HANG_GUARD)}): see stderr"
        hello = json.loads(line)
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
    if shape.tenant is not None:  # the Entra preset, with the loopback provider as authority
        entra = providers.entra(
            shape.tenant,
            audience=shape.audience,
            authority=provider.origin,
            allow_insecure_loopback=True,
        )
        verifier = JWTVerifier(issuers=[entra])
    else:
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
        return {"sub": claims.subject, "scopes": sorted(claims.scopes), "tenant": claims.tenant}

    @app.post("/orders")
    def place_order(claims: Claims = writer) -> dict[str, Any]:
        return {"sub": claims.subject}

    return app


@pytest.fixture(scope="module")
def browser() -> Iterator[sync_api.Browser]:
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@dataclass
class Served:
    """The app on 127.0.0.1 and the provider its login goes to."""

    shape: Shape
    provider: LoginProvider
    url: str


@pytest.fixture(params=[GENERIC, ENTRA], ids=lambda shape: shape.name)
def served(request: pytest.FixtureRequest) -> Iterator[Served]:
    shape: Shape = request.param
    # The app's port first: the provider registers its redirect URI.
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


def swagger_file(route: sync_api.Route) -> None:
    """Answer the browser: Swagger UI from the npm package, 127.0.0.1 as is, nothing else."""
    url = route.request.url
    if url.startswith(CDN):
        name = urlsplit(url).path.rsplit("/", 1)[-1]
        kind = {"js": "text/javascript", "css": "text/css"}[name.rsplit(".", 1)[-1]]
        route.fulfill(path=str(SWAGGER_DIST / name), content_type=kind)
    elif urlsplit(url).hostname == "127.0.0.1":
        route.continue_()
    else:
        route.abort()


def sign_in(page: sync_api.Page, shape: Shape, token_url: str) -> str:
    """Authorize with the read scope only, sign in at the provider; the access token."""
    page.locator("button.authorize").first.click()
    dialog = page.locator(".modal-ux")
    # Both scopes are ticked when the dialog opens (init_oauth): untick the write scope.
    write = dialog.locator(f'input[data-value="{shape.asked(shape.write)}"]')
    dialog.locator(f'label[for="{write.get_attribute("id")}"]').click()
    assert not write.is_checked()
    with page.expect_popup() as opened:
        dialog.get_by_role("button", name="Apply given OAuth2 credentials").click()
    popup = opened.value
    popup.fill('input[name="login"]', "alice")
    popup.fill('input[name="password"]', "any password")
    with page.expect_response(lambda answer: without_query(answer.url) == token_url) as exchanged:
        popup.click('button[type="submit"]')  # Sign-in
        popup.click('button[type="submit"]')  # the consent page: Continue
    # The popup went back through /docs/oauth2-redirect and closed; the page then
    # fetched the token (a CORS request to the provider) and shows the login done.
    assert exchanged.value.status == 200
    token: str = exchanged.value.json()["access_token"]
    dialog.get_by_role("button", name="Remove authorization").wait_for()
    dialog.locator("button.btn-done").click()
    return token


def try_it_out(page: sync_api.Page, url: str, method: str) -> tuple[str, int, Any]:
    """Try it out -> Execute on ``method /orders``: the Authorization sent, status, body."""
    block = page.locator(f".opblock-{method.lower()}").filter(has_text="/orders")
    block.locator(".opblock-summary").click()
    block.get_by_role("button", name="Try it out").click()
    with page.expect_response(
        lambda answer: answer.url == f"{url}/orders" and answer.request.method == method
    ) as answered:
        block.get_by_role("button", name="Execute").click()
    answer = answered.value
    # What the page shows is what the server answered.
    shown = block.locator(".live-responses-table .response .response-col_status")
    assert shown.inner_text().split()[0] == str(answer.status)
    return answer.request.headers["authorization"], answer.status, answer.json()


def without_query(url: str) -> str:
    """``url`` up to its query (Swagger UI adds ``authorize_params`` to the token URL)."""
    return url.partition("?")[0]


def payload_of(token: str) -> dict[str, Any]:
    """The claims of a JWT, read without verifying (the app verified it)."""
    part = token.split(".")[1]
    decoded: dict[str, Any] = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    return decoded


def test_authorize_logs_in_with_pkce_and_the_token_opens_the_route(
    browser: sync_api.Browser, served: Served
) -> None:
    shape = served.shape
    login = shape.login(served.provider.origin)
    context = browser.new_context()
    context.set_default_timeout(STEP_MS)
    context.route("**/*", swagger_file)
    sent: list[sync_api.Request] = []

    def keep(request: sync_api.Request) -> None:  # Playwright takes no builtin method
        sent.append(request)

    context.on("request", keep)
    try:
        page = context.new_page()
        page.goto(f"{served.url}/docs")
        token = sign_in(page, shape, login.token_url)
        read = try_it_out(page, served.url, "GET")
        write = try_it_out(page, served.url, "POST")
    finally:
        context.close()

    # The authorize request: PKCE with S256, the full name of the one scope ticked.
    [authorize] = [r for r in sent if r.url.startswith(login.authorization_url + "?")]
    asked = {name: values[0] for name, values in parse_qs(urlsplit(authorize.url).query).items()}
    assert asked["code_challenge_method"] == "S256"
    assert asked["scope"] == shape.asked(shape.read)
    assert asked["client_id"] == CLIENT_ID
    assert asked["response_type"] == "code"
    assert {name: asked[name] for name in login.authorize_params} == login.authorize_params
    # The token request proves the challenge with its verifier; no secret in a browser.
    [exchange] = [r for r in sent if without_query(r.url) == login.token_url and r.method == "POST"]
    form = {name: values[0] for name, values in parse_qs(exchange.post_data or "").items()}
    assert form["grant_type"] == "authorization_code"
    assert "client_secret" not in form
    digest = hashlib.sha256(form["code_verifier"].encode()).digest()
    assert base64.urlsafe_b64encode(digest).rstrip(b"=").decode() == asked["code_challenge"]
    # The token carries the short name.
    claims = payload_of(token)
    assert (claims["sub"], claims["aud"]) == ("alice", shape.audience)
    if shape.tenant is not None:
        assert (claims["scp"], claims["tid"]) == (shape.read, shape.tenant)
        assert "scope" not in claims
    else:
        assert claims["scope"] == shape.read
        assert "scp" not in claims
    # Execute sent it: the read route answers its claims, the write route 403.
    bearer = f"Bearer {token}"
    assert read == (bearer, 200, {"sub": "alice", "scopes": [shape.read], "tenant": shape.tenant})
    assert write[:2] == (bearer, 403)
    assert write[2]["reason"] == "insufficient-scope"

"""A remote MCP server behind OAuth, for `totem mcp login`; written with the official MCP Python SDK
(mcp 2.x), which serves both the protected resource and its authorization server: RFC 9728 and
RFC 8414 metadata, dynamic client registration (RFC 7591), authorization code with PKCE, refresh
tokens. The authorization endpoint approves every request at once (no person to ask), so a test
plays the browser by following its redirect to Totem's loopback address.

    python oauth_server.py PORT [--lifetime SECS] [--no-registration]

With --no-registration it registers no clients; the client `totem-by-hand` exists already (as if a
user had registered it by hand), for `totem mcp login --client-id`.

Its one tool, `secret_word`, works only with a valid access token (the SDK answers 401 before it
otherwise). Test hooks, outside MCP and without a token:

    POST /test/expire   every access token stops working (the client still thinks it valid)
    POST /test/revoke   every access and refresh token stops working (a refresh gets invalid_grant)
    POST /test/forget-clients   every registered client is forgotten (as if deleted at the server)
    GET  /test/stats    {"registered": N, "authorized": N, "refreshed": N}
    GET  /test/tokens   {"access": [...], "refresh": [...]}: the tokens it issued that still count
"""

import secrets
import sys
import time

import uvicorn
from starlette.requests import Request
from starlette.responses import JSONResponse

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions, RevocationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

port = int(sys.argv[1])
lifetime = int(sys.argv[sys.argv.index("--lifetime") + 1]) if "--lifetime" in sys.argv else 3600
registration = "--no-registration" not in sys.argv
base = f"http://127.0.0.1:{port}"


class LoopbackClient(OAuthClientInformationFull):
    """A client registered by hand for a native app: any port of 127.0.0.1 may be its redirect
    (RFC 8252 section 7.3)."""

    def validate_redirect_uri(self, redirect_uri):
        if redirect_uri is not None and str(redirect_uri).startswith("http://127.0.0.1:"):
            return redirect_uri
        return super().validate_redirect_uri(redirect_uri)


class AutoApprove:
    """An authorization server that says yes to everyone, in memory."""

    def __init__(self):
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}
        self.stats = {"registered": 0, "authorized": 0, "refreshed": 0}
        if not registration:
            # The client a user would have registered by hand; any loopback port may redirect.
            self.clients["totem-by-hand"] = LoopbackClient(
                client_id="totem-by-hand",
                redirect_uris=["http://127.0.0.1/callback"],
                token_endpoint_auth_method="none",
                grant_types=["authorization_code", "refresh_token"],
            )

    async def get_client(self, client_id):
        return self.clients.get(client_id)

    async def register_client(self, client_info):
        self.clients[client_info.client_id] = client_info
        self.stats["registered"] += 1

    async def authorize(self, client, params: AuthorizationParams):
        code = AuthorizationCode(
            code=secrets.token_urlsafe(24),
            scopes=params.scopes or [],
            expires_at=time.time() + 300,
            client_id=client.client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        self.codes[code.code] = code
        return construct_redirect_uri(str(params.redirect_uri), code=code.code, state=params.state)

    async def load_authorization_code(self, client, authorization_code):
        return self.codes.get(authorization_code)

    async def exchange_authorization_code(self, client, authorization_code):
        self.codes.pop(authorization_code.code, None)
        self.stats["authorized"] += 1
        return self.issue(client.client_id, authorization_code.scopes, authorization_code.resource)

    async def load_refresh_token(self, client, refresh_token):
        token = self.refresh.get(refresh_token)
        return token if token and token.client_id == client.client_id else None

    async def exchange_refresh_token(self, client, refresh_token, scopes):
        self.refresh.pop(refresh_token.token, None)
        self.stats["refreshed"] += 1
        return self.issue(client.client_id, scopes or refresh_token.scopes, refresh_token.resource)

    async def load_access_token(self, token):
        found = self.access.get(token)
        if found and found.expires_at and found.expires_at < time.time():
            return None
        return found

    async def revoke_token(self, token):
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)

    def issue(self, client_id, scopes, resource):
        access, refresh = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        self.access[access] = AccessToken(
            token=access,
            client_id=client_id,
            scopes=scopes,
            expires_at=int(time.time()) + lifetime,
            resource=resource,
        )
        self.refresh[refresh] = RefreshToken(
            token=refresh, client_id=client_id, scopes=scopes, resource=resource
        )
        return OAuthToken(
            access_token=access,
            expires_in=lifetime,
            refresh_token=refresh,
            scope=" ".join(scopes) or None,
        )


provider = AutoApprove()
server = MCPServer(
    "oauth-server",
    auth_server_provider=provider,
    auth=AuthSettings(
        issuer_url=base,
        resource_server_url=f"{base}/mcp",
        validate_token_resource=False,
        client_registration_options=ClientRegistrationOptions(enabled=registration),
        revocation_options=RevocationOptions(enabled=True),
    ),
)


@server.tool()
def secret_word() -> str:
    """The word only a logged-in client may read."""
    token = get_access_token()
    return f"swordfish (for client {token.client_id})" if token else "no token"


@server.custom_route("/test/expire", methods=["POST"])
async def expire(request: Request):
    for token in provider.access.values():
        token.expires_at = 1
    return JSONResponse({"expired": len(provider.access)})


@server.custom_route("/test/revoke", methods=["POST"])
async def revoke(request: Request):
    provider.access.clear()
    provider.refresh.clear()
    return JSONResponse({"revoked": True})


@server.custom_route("/test/forget-clients", methods=["POST"])
async def forget_clients(request: Request):
    forgotten = [c for c in provider.clients if c != "totem-by-hand"]
    for client_id in forgotten:
        del provider.clients[client_id]
    return JSONResponse({"forgotten": len(forgotten)})


@server.custom_route("/test/tokens", methods=["GET"])
async def tokens(request: Request):
    return JSONResponse({"access": list(provider.access), "refresh": list(provider.refresh)})


@server.custom_route("/test/stats", methods=["GET"])
async def stats(request: Request):
    return JSONResponse(provider.stats)


uvicorn.run(server.streamable_http_app(), host="127.0.0.1", port=port, log_level="warning")

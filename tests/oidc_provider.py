"""A stand-in OpenID Connect provider: a local issuer on a real port serving what a provider such as Keycloak,
Okta or Dex serves to a relying party (discovery document, JWKS, authorization, token and end-session
endpoints), with ID tokens signed RS256 by a key made for the run. It never imports our code, and it signs with
`cryptography` directly, not with the JOSE library our code verifies with.

It approves every authorization request at once for `provider.user` (the claims of whoever "signs in"), after
checking what a strict provider checks: a known client and redirect URI, `response_type=code`, a PKCE S256
challenge, a nonce. The token endpoint checks the client's secret (basic or post), spends each code once, and
the PKCE verifier against the challenge. `provider.tamper` overrides claims of the next ID tokens (a wrong
`aud`, a past `exp`, an old `nonce`); `provider.sign_with_stranger` signs them with a key the JWKS does not hold.
"""

import base64
import hashlib
import json
import secrets
import threading
import time
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlencode, urlsplit

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _int(value: int) -> str:
    return _b64(value.to_bytes((value.bit_length() + 7) // 8, "big"))


@cache
def _key(which: str) -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


class Provider:
    def __init__(self, client_id: str = "osmo", client_secret: str = "provider-secret",
                 redirect_prefix: str = "http://"):
        self.client_id, self.client_secret = client_id, client_secret
        self.redirect_prefix = redirect_prefix
        self.user: dict = {"sub": "u-1", "preferred_username": "ada", "email": "ada@example.com",
                           "groups": []}
        self.tamper: dict = {}
        self.sign_with_stranger = False
        self.issuer_in_discovery: str | None = None  # None: the real issuer
        self.codes: dict[str, dict] = {}
        self.nonces: list[str] = []  # every nonce an authorization request carried, in order
        self.token_requests: list[dict] = []
        self.logouts: list[dict] = []
        self.kid = "test-key"
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self.issuer = f"http://127.0.0.1:{self._server.server_address[1]}/realms/test"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    # ---- what it serves ---------------------------------------------------------------------------------

    def discovery(self) -> dict:
        return {"issuer": self.issuer_in_discovery or self.issuer,
                "authorization_endpoint": f"{self.issuer}/auth", "token_endpoint": f"{self.issuer}/token",
                "jwks_uri": f"{self.issuer}/certs", "end_session_endpoint": f"{self.issuer}/logout",
                "response_types_supported": ["code"], "subject_types_supported": ["public"],
                "id_token_signing_alg_values_supported": ["RS256"], "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"]}

    def jwks(self) -> dict:
        numbers = _key("provider").public_key().public_numbers()
        return {"keys": [{"kty": "RSA", "use": "sig", "alg": "RS256", "kid": self.kid,
                          "n": _int(numbers.n), "e": _int(numbers.e)}]}

    def id_token(self, nonce: str) -> str:
        now = int(time.time())
        claims = {"iss": self.issuer, "aud": self.client_id, "iat": now, "exp": now + 300, "nonce": nonce,
                  "auth_time": now, **self.user, **self.tamper}
        header = {"alg": "RS256", "typ": "JWT", "kid": self.kid}
        signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}".encode()
        key = _key("stranger" if self.sign_with_stranger else "provider")
        signature = key.sign(signing_input, padding.PKCS1v15(), hashes.SHA256())
        return f"{signing_input.decode()}.{_b64(signature)}"

    def authorize(self, query: dict) -> tuple[int, dict, dict]:
        """(status, headers, json body) for an authorization request."""
        one = {key: values[0] for key, values in query.items()}
        if one.get("client_id") != self.client_id:
            return 400, {}, {"error": "unauthorized_client"}
        redirect = one.get("redirect_uri", "")
        if not redirect.startswith(self.redirect_prefix):
            return 400, {}, {"error": "invalid_request", "error_description": "redirect_uri not registered"}
        if one.get("response_type") != "code" or "openid" not in one.get("scope", "").split():
            return 400, {}, {"error": "invalid_request"}
        if one.get("code_challenge_method") != "S256" or not one.get("code_challenge"):
            return 400, {}, {"error": "invalid_request", "error_description": "PKCE S256 is required"}
        if not one.get("nonce") or not one.get("state"):
            return 400, {}, {"error": "invalid_request", "error_description": "state and nonce are required"}
        self.nonces.append(one["nonce"])
        code = secrets.token_urlsafe(16)
        self.codes[code] = {"challenge": one["code_challenge"], "nonce": one["nonce"], "redirect_uri": redirect}
        separator = "&" if "?" in redirect else "?"
        return 302, {"Location": f"{redirect}{separator}{urlencode({'code': code, 'state': one['state']})}"}, {}

    def token(self, form: dict, authorization: str) -> tuple[int, dict]:
        one = {key: values[0] for key, values in form.items()}
        self.token_requests.append(one)
        client_id, client_secret = one.get("client_id"), one.get("client_secret")
        if authorization.startswith("Basic "):
            client_id, _, client_secret = base64.b64decode(authorization[6:]).decode().partition(":")
        if client_id != self.client_id or client_secret != self.client_secret:
            return 401, {"error": "invalid_client"}
        grant = self.codes.pop(one.get("code", ""), None)  # spent once, used or not
        if one.get("grant_type") != "authorization_code" or grant is None:
            return 400, {"error": "invalid_grant"}
        if one.get("redirect_uri") != grant["redirect_uri"]:
            return 400, {"error": "invalid_grant", "error_description": "redirect_uri differs"}
        verifier = one.get("code_verifier", "")
        if _b64(hashlib.sha256(verifier.encode()).digest()) != grant["challenge"]:
            return 400, {"error": "invalid_grant", "error_description": "PKCE verifier does not match"}
        return 200, {"access_token": secrets.token_urlsafe(24), "token_type": "Bearer", "expires_in": 300,
                     "id_token": self.id_token(grant["nonce"])}

    def _handler(self):
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, status: int, body: dict, headers: dict | None = None):
                data = json.dumps(body).encode()
                self.send_response(status)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                url = urlsplit(self.path)
                base = urlsplit(provider.issuer).path
                route = url.path[len(base):] if url.path.startswith(base) else None
                query = parse_qs(url.query)
                if route == "/.well-known/openid-configuration":
                    self._send(200, provider.discovery())
                elif route == "/certs":
                    self._send(200, provider.jwks())
                elif route == "/auth":
                    status, headers, body = provider.authorize(query)
                    self._send(status, body, headers)
                elif route == "/logout":
                    provider.logouts.append({key: values[0] for key, values in query.items()})
                    back = query.get("post_logout_redirect_uri", [""])[0]
                    self._send(302, {}, {"Location": back}) if back else self._send(200, {"logged_out": True})
                else:
                    self._send(404, {"error": "not_found"})

            def do_POST(self):
                url = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                form = parse_qs(self.rfile.read(length).decode())
                if url.path == urlsplit(provider.issuer).path + "/token":
                    status, body = provider.token(form, self.headers.get("Authorization", ""))
                    self._send(status, body, {"Cache-Control": "no-store"})
                else:
                    self._send(404, {"error": "not_found"})

        return Handler

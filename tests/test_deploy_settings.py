"""Production settings as docs/operations/ documents them (settings.md, https.md): `manage.py
check --deploy` finds nothing, and with DEBUG off behind a TLS proxy a real WSGI server (gunicorn) answers
HTTPS-only pages with the hardening headers and serves the collected static files through whitenoise."""

import json
import os
import re
import secrets
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.hashers import PBKDF2PasswordHasher

from tests.support.children import database_url
from tests.support.ports import free_port
from tests.waiting import until

ROOT = Path(__file__).resolve().parent.parent
# The documented production environment, less the database and broker of the deployment.
PRODUCTION = {
    "DEBUG": "0",
    "ALLOWED_HOSTS": "gpu.example.com",
    "CSRF_TRUSTED_ORIGINS": "https://gpu.example.com",
    "SECURE_PROXY_SSL_HEADER": "HTTP_X_FORWARDED_PROTO=https",
    "SECURE_SSL_REDIRECT": "1",
    "SECURE_HSTS_SECONDS": "31536000",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS": "1",
    "SECURE_HSTS_PRELOAD": "1",
}


def production_env(tmp_path: Path, **extra: str) -> dict:
    """Nothing of the test run's environment but the path: no DEBUG, OSMO_* or SECURE_* leaks in."""
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", str(tmp_path)), "LANG": "C.UTF-8",
           "DJANGO_SETTINGS_MODULE": "osmo_site.settings", "OSMO_ENV_FILE": "", "OSMO_DATA_DIR": str(tmp_path / "data"),
           "SECRET_KEY": secrets.token_urlsafe(50),
           "DATABASE_URL": "postgres://osmo@127.0.0.1:5432/osmo", "CELERY_BROKER_URL": "redis://127.0.0.1:6379/0",
           **PRODUCTION}
    env.update(extra)
    return {key: value for key, value in env.items() if value is not None}


def manage(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)


def test_check_deploy_is_clean_with_the_documented_production_environment(tmp_path):
    done = manage(production_env(tmp_path), "check", "--deploy", "--fail-level", "WARNING")
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "System check identified no issues (0 silenced)." in output
    assert "WARNING" not in output.upper()


def test_with_debug_off_cookies_are_secure_by_default_and_check_deploy_names_what_https_still_needs(tmp_path):
    env = production_env(tmp_path, ALLOWED_HOSTS="gpu.example.com", CSRF_TRUSTED_ORIGINS=None,
                         SECURE_PROXY_SSL_HEADER=None, SECURE_SSL_REDIRECT=None, SECURE_HSTS_SECONDS=None,
                         SECURE_HSTS_INCLUDE_SUBDOMAINS=None, SECURE_HSTS_PRELOAD=None)
    done = manage(env, "check", "--deploy", "--fail-level", "WARNING")
    assert done.returncode == 1
    # Secure cookies, nosniff, DENY and the referrer policy need no setting; redirect and HSTS are the operator's.
    assert set(re.findall(r"\((security\.W\d+)\)", done.stderr)) == {"security.W004", "security.W008"}, done.stderr


def test_a_malformed_proxy_ssl_header_stops_the_process(tmp_path):
    done = manage(production_env(tmp_path, SECURE_PROXY_SSL_HEADER="X-Forwarded-Proto"), "check")
    assert done.returncode == 1
    assert "SECURE_PROXY_SSL_HEADER='X-Forwarded-Proto': expected HEADER=VALUE" in done.stderr


def settings_of(env: dict, *names: str) -> dict:
    code = ("import json, django; django.setup(); from django.conf import settings; "
            f"print(json.dumps({{name: getattr(settings, name) for name in {list(names)!r}}}))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_secure_cookies_follow_debug_unless_set_and_hsts_follows_the_redirect(tmp_path):
    names = ("SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE", "SECURE_SSL_REDIRECT", "SECURE_HSTS_SECONDS",
             "SECURE_HSTS_INCLUDE_SUBDOMAINS", "SECURE_HSTS_PRELOAD", "SECURE_PROXY_SSL_HEADER", "CSRF_TRUSTED_ORIGINS")
    bare = {name: None for name in PRODUCTION if name not in ("DEBUG", "ALLOWED_HOSTS")}
    assert settings_of(production_env(tmp_path, **bare), *names) == {
        "SESSION_COOKIE_SECURE": True, "CSRF_COOKIE_SECURE": True, "SECURE_SSL_REDIRECT": False,
        "SECURE_HSTS_SECONDS": 0, "SECURE_HSTS_INCLUDE_SUBDOMAINS": False, "SECURE_HSTS_PRELOAD": False,
        "SECURE_PROXY_SSL_HEADER": None, "CSRF_TRUSTED_ORIGINS": []}
    assert settings_of(production_env(tmp_path, **bare, DEBUG="1"), *names[:2]) == {
        "SESSION_COOKIE_SECURE": False, "CSRF_COOKIE_SECURE": False}
    assert settings_of(production_env(tmp_path, **bare, DEBUG="1", SESSION_COOKIE_SECURE="1"), names[0]) == {
        "SESSION_COOKIE_SECURE": True}
    redirected = settings_of(production_env(tmp_path, **{
        **bare, "SECURE_SSL_REDIRECT": "1", "SECURE_PROXY_SSL_HEADER": "X-Forwarded-Proto=https",
        "CSRF_TRUSTED_ORIGINS": "https://gpu.example.com,https://gpu.example.org"}), *names)
    assert redirected["SECURE_HSTS_SECONDS"] == 31536000
    assert redirected["SECURE_PROXY_SSL_HEADER"] == ["HTTP_X_FORWARDED_PROTO", "https"]
    assert redirected["CSRF_TRUSTED_ORIGINS"] == ["https://gpu.example.com", "https://gpu.example.org"]


@pytest.mark.django_db
def test_the_policy_is_on_every_response_and_an_empty_one_turns_it_off(client, settings):
    assert client.get("/accounts/login/")["Content-Security-Policy"] == settings.OSMO_CSP
    assert "frame-ancestors 'none'" in client.get("/healthz")["Content-Security-Policy"]
    settings.OSMO_CSP = ""
    assert "Content-Security-Policy" not in client.get("/accounts/login/")


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


OPENER = urllib.request.build_opener(NoRedirect)


def fetch(url: str, data: bytes | None = None, **headers: str) -> tuple[int, object, bytes]:
    request = urllib.request.Request(url, data=data, headers=headers)
    try:
        with OPENER.open(request, timeout=30) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read()


def cookies(headers) -> dict[str, str]:
    """name -> the whole Set-Cookie line (http.cookiejar would not send a Secure cookie back over http)."""
    return {line.split("=", 1)[0]: line for line in headers.get_all("Set-Cookie") or []}


def cookie_value(line: str) -> str:
    return line.split(";", 1)[0].split("=", 1)[1]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_behind_a_tls_proxy_with_debug_off_pages_are_hardened_and_static_files_come_from_whitenoise(
        tmp_path, django_user_model):
    # Hashed as the production settings verify it (the suite's own hasher, MD5, is not among theirs).
    hasher = PBKDF2PasswordHasher()
    django_user_model.objects.create(username="viewer", password=hasher.encode("pw-viewer-123", hasher.salt(), 1000))
    env = production_env(tmp_path, ALLOWED_HOSTS="127.0.0.1", CSRF_TRUSTED_ORIGINS=None, DATABASE_URL=database_url(),
                         OSMO_DB_POOL_MAX="1")
    collected = manage(env, "collectstatic", "--noinput", "-v0")
    assert collected.returncode == 0, collected.stderr
    assert (tmp_path / "data" / "staticfiles" / "staticfiles.json").is_file()

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = (tmp_path / "gunicorn.log").open("w+")
    server = subprocess.Popen([sys.executable, "-m", "gunicorn", "--bind", f"127.0.0.1:{port}", "--workers", "1",
                               "osmo_site.wsgi:application"], cwd=ROOT, env=env, stdout=log,
                              stderr=subprocess.STDOUT, start_new_session=True)
    tls = {"X-Forwarded-Proto": "https"}  # what the proxy adds to every request it forwards
    try:
        def answers() -> bool:
            try:
                return fetch(f"{base}/healthz", **tls)[0] == 200
            except OSError:  # not listening yet
                return False

        until(lambda: server.poll() is not None or answers(), "gunicorn to answer /healthz", seconds=120)
        log.seek(0)
        assert server.poll() is None and fetch(f"{base}/healthz", **tls)[0] == 200, log.read()

        # Plain HTTP is sent to HTTPS; over HTTPS the page carries the hardening headers and secure cookies.
        status, headers, _ = fetch(f"{base}/accounts/login/")
        assert status == 301 and headers["Location"] == f"https://127.0.0.1:{port}/accounts/login/"
        status, headers, body = fetch(f"{base}/accounts/login/", **tls)
        assert status == 200
        assert headers["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains; preload"
        assert headers["Content-Security-Policy"] == settings.OSMO_CSP
        assert "script-src 'self';" in headers["Content-Security-Policy"]
        assert headers["X-Frame-Options"] == "DENY" and headers["X-Content-Type-Options"] == "nosniff"
        assert headers["Referrer-Policy"] == "same-origin"
        csrf_cookie = cookies(headers)["csrftoken"]
        assert "Secure" in csrf_cookie

        page = body.decode()
        css = re.findall(r'href="(/static/osmo/site\.[0-9a-f]{12}\.css)"', page)
        assert len(css) == 1, page  # the hashed name of the manifest
        status, headers, content = fetch(base + css[0], **tls)
        assert status == 200 and headers["Content-Type"].startswith("text/css")
        assert content == (ROOT / "static" / "osmo" / "site.css").read_bytes()
        assert "immutable" in headers["Cache-Control"]
        status, headers, _ = fetch(base + css[0], **tls, **{"Accept-Encoding": "gzip"})
        assert status == 200 and headers["Content-Encoding"] == "gzip"

        # Signed in (the CSRF origin check passes behind the proxy), a page names htmx and pages.js.
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
        form = f"username=viewer&password=pw-viewer-123&csrfmiddlewaretoken={token}".encode()
        status, headers, _ = fetch(f"{base}/accounts/login/", form, **tls, Origin=f"https://127.0.0.1:{port}",
                                   Cookie=f"csrftoken={cookie_value(csrf_cookie)}",
                                   **{"Content-Type": "application/x-www-form-urlencoded"})
        assert status == 302, headers
        session = cookies(headers)["sessionid"]
        assert "Secure" in session and "HttpOnly" in session
        status, _, body = fetch(f"{base}/nodes/", **tls, Cookie=f"sessionid={cookie_value(session)}")
        assert status == 200
        scripts = re.findall(r'<script src="(/static/[^"]+)"', body.decode())
        htmx = [src for src in scripts if re.fullmatch(r"/static/django_htmx/htmx-2\.min\.[0-9a-f]{12}\.js", src)]
        assert len(htmx) == 1 and any(re.fullmatch(r"/static/osmo/pages\.[0-9a-f]{12}\.js", s) for s in scripts)
        for src in scripts:
            status, headers, content = fetch(base + src, **tls)
            assert status == 200 and headers["Content-Type"].startswith("text/javascript"), src
        assert b"htmx" in fetch(base + htmx[0], **tls)[2][:2000]
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait()
        log.close()


@pytest.mark.parametrize("extra, words", [
    ({"OIDC_ISSUER": "https://sso.example.com/realms/gpu"}, "OIDC_ISSUER and OIDC_CLIENT_ID go together"),
    ({"OIDC_CLIENT_ID": "osmo"}, "OIDC_ISSUER and OIDC_CLIENT_ID go together"),
    ({"OIDC_ISSUER": "https://sso.example.com/realms/gpu", "OIDC_CLIENT_ID": "osmo", "OIDC_SCOPES": "profile"},
     "must include openid"),
])
def test_a_half_configured_openid_connect_provider_stops_the_process(tmp_path, extra, words):
    done = manage(production_env(tmp_path, **extra), "check")
    assert done.returncode == 1
    assert words in done.stderr

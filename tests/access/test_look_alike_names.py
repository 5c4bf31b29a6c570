"""User names that pass for another's are refused where accounts are made (issue 42): a name from the identity
provider (OpenID Connect or the authenticating proxy) or from the user API that mixes scripts (alice with a Cyrillic
a, U+0430) or is not in NFKC form (alice in fullwidth letters). A name in one script is still welcome."""

import pytest
from django.contrib.auth import get_user_model
from django.test import override_settings
from rest_framework.test import APIClient

from pools.engine.user_names import user_name_problem
from tests.access.test_hardening import PROXY, as_wsgi, via_proxy
from tests.access.test_oidc import provider, sign_in, signed_in_as  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db
User = get_user_model()
CYRILLIC_ALICE = "\u0430lice"
FULLWIDTH_ALICE = "\uff41\uff4c\uff49\uff43\uff45"


@pytest.mark.parametrize("name", [CYRILLIC_ALICE, FULLWIDTH_ALICE, "\u03a9mega", "adm\u0456n"])
def test_look_alike_names_are_named_as_such(name):
    assert user_name_problem(name) is not None


@pytest.mark.parametrize("name", ["alice", "José-Łukasz", "\u5c71\u7530\u592a\u90ce", "\u3084\u307e\u3060\u592a\u90ce",
                                  "\u043e\u043b\u044f", "ali.ce+1@example.com", "sso:ada"])
def test_names_in_one_script_are_welcome(name):
    assert user_name_problem(name) is None


@pytest.mark.parametrize("name, words", [(CYRILLIC_ALICE, "mixes scripts (Cyrillic, Latin)"),
                                         (FULLWIDTH_ALICE, "reads as &#x27;alice&#x27;")])
def test_an_oidc_name_that_passes_for_another_signs_nobody_in(client, provider, name, words):  # noqa: F811
    provider.user["preferred_username"] = name
    response = sign_in(client)
    assert response.status_code == 403
    assert "the user name from the provider is refused" in response.content.decode()
    assert words in response.content.decode()
    assert signed_in_as(client) is None
    assert not User.objects.exists()


@override_settings(ACCESS_HEADER_LOGIN=True, ACCESS_TRUSTED_PROXIES=["10.0.0.0/24"])
def test_a_proxy_name_that_passes_for_another_is_refused_naming_the_header():
    assert PROXY.startswith("10.0.0.")
    response = via_proxy(APIClient(), as_wsgi(CYRILLIC_ALICE))
    assert response.status_code == 403, response.content
    assert response.json()["field"] == "X-Forwarded-User" and "mixes scripts" in response.json()["detail"]
    assert not User.objects.exists()


def test_the_user_api_refuses_a_name_that_passes_for_another(client_as):
    response = client_as("staff").post("/api/auth/user", {"id": CYRILLIC_ALICE}, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["field"] == "id" and "mixes scripts" in response.json()["detail"]
    assert not User.objects.filter(username=CYRILLIC_ALICE).exists()

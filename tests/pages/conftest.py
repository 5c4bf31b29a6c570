"""The pages' clients, signed in as staff or as a member who may use alpha-pool only, around the small fleet of
tests/support/fleet.py (`fleet`, `alpha_member`); and the readers of their answers."""

import pytest

from tests.pages import quota_world


@pytest.fixture
def projects_and_quotas(fleet):
    """Departments, projects, quotas and pods on the fleet: tests/pages/quota_world.py."""
    quota_world.build()


@pytest.fixture
def staff_client(client, staff):
    client.force_login(staff)
    return client


@pytest.fixture
def member_client(client, alpha_member):
    client.force_login(alpha_member)
    return client


def body(response) -> str:
    content = b"".join(response.streaming_content) if response.streaming else response.content
    return content.decode()


def fragment(client, url: str, target: str | None = None):
    headers = {"HTTP_HX_REQUEST": "true"}
    if target:
        headers["HTTP_HX_TARGET"] = target
    return client.get(url, **headers)

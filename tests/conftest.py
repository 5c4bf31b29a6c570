import json
import re
from pathlib import Path

import pytest
from django.conf import settings

SHARED = Path(__file__).resolve().parents[2] / "shared"
SEEDS = SHARED / "seeds"


def pytest_collection_modifyitems(config, items):
    on_postgres = settings.DATABASES["default"]["ENGINE"].endswith("postgresql")
    for item in items:
        if item.get_closest_marker("postgres") and not on_postgres:
            item.add_marker(pytest.mark.skip(reason="needs PostgreSQL (REQUIRE_SERVICES=1 makes this a failure)"))
        if item.get_closest_marker("redis") and not settings.REDIS_AVAILABLE:
            item.add_marker(pytest.mark.skip(reason="needs Redis (REQUIRE_SERVICES=1 makes this a failure)"))


@pytest.fixture
def defaults(db):
    from pools.defaults import init_defaults

    init_defaults(author="tests")


@pytest.fixture
def staff(django_user_model):
    return django_user_model.objects.create_user("ops", password="pw-ops-123", is_staff=True, is_superuser=True)


@pytest.fixture
def member(django_user_model):
    return django_user_model.objects.create_user("researcher", password="pw-res-123")


@pytest.fixture
def api(client, staff):
    from rest_framework.test import APIClient

    api_client = APIClient()
    api_client.force_authenticate(staff)
    return api_client


def seed_json_blocks(name: str) -> list[str]:
    """The JSON documents printed in a seed page (heredocs, echo '...' blocks and code blocks)."""
    text = next(SEEDS.glob(f"{name}_*.txt")).read_text()
    blocks = re.findall(r"<< EOF > \S+\n(.*?)\nEOF", text, flags=re.S)
    blocks += re.findall(r"echo '(.*?)' >", text, flags=re.S)
    blocks += [
        re.sub(r"^  ", "", block, flags=re.M)
        for block in re.findall(r"\.\. code-block:: json\n\n(.*?)\n(?=\S)", text, flags=re.S)
    ]
    # Seed 000 also prints pool examples as bare text after "Configure a pool for ...:".
    blocks += re.findall(r"Configure a pool for [^\n]*:\n(\{\n.*?\n\})\n(?=[A-Z])", text, flags=re.S)
    return blocks


def reference_defaults() -> dict:
    return json.loads((SHARED / "reference" / "osmo-defaults.json").read_text())

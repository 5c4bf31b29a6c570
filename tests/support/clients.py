"""The admin's browser client, one for the whole suite (a plugin: tests/conftest.py's pytest_plugins)."""

import pytest
from django.test import Client


@pytest.fixture
def admin_client(staff):
    """A browser client (django.test.Client, a client of its own) signed in as `staff`, a superuser. It replaces
    pytest-django's `admin_client`, whose user `admin` would be a second superuser beside `staff`."""
    client = Client()
    client.force_login(staff)
    return client

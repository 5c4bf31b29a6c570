"""What a `./manage.py` command loads before it does its work (issue 45 point 7): every command, and every
subprocess the suite starts, pays Django's setup; beyond it a command loads what its work needs. Django's setup
loads neither the pages' views nor cryptography, and the inventory commands load the API's serializers (DRF's
fields with their optional imports, drf_spectacular, the viewsets) only in the branch that prints JSON.

A fresh interpreter sets Django up as manage.py does (this test's process has loaded everything already), then
loads the commands' modules as `./manage.py NAME` does, and says which of the heavy modules it holds."""

import json
import os
import subprocess
import sys

from django.conf import settings

HEAVY = ["rest_framework.fields", "drf_spectacular.utils", "rest_framework.viewsets", "pools.api.inventory",
         "pools.pages.views", "cryptography.fernet"]
COMMANDS = [("pools", "pool"), ("pools", "resource"), ("pools", "describe"), ("pools", "audit"), ("pools", "user"),
            ("scheduling", "usage")]
PROBE = """
import json, sys
import django
django.setup()
from django.core.management import load_command_class
heavy, commands = json.loads(sys.argv[1])
at_setup = [name for name in heavy if name in sys.modules]
for app, name in commands:
    load_command_class(app, name)
print(json.dumps({"setup": at_setup, "commands": [name for name in heavy if name in sys.modules]}))
"""


def test_setup_and_the_inventory_commands_load_no_serializer_page_or_cipher(tmp_path):
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "osmo_site.settings", "OSMO_DATA_DIR": str(tmp_path),
           "SECRET_KEY": "startup-test", "DEBUG": "1"}
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps([HEAVY, COMMANDS])], cwd=settings.BASE_DIR,
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    loaded = json.loads(done.stdout.splitlines()[-1])
    assert loaded == {"setup": [], "commands": []}, loaded

#!/usr/bin/env python3
"""Django's command line for this project: `./manage.py COMMAND ...` (or `python3 manage.py ...`).

Run by any interpreter, it hands over to the checkout's `.venv/bin/python` when that exists (`make install`
creates it), so the commands work without activating the virtual environment. Settings come from the
environment and from the data directory's settings file that `make install` writes (see docs/operations/settings.md)."""

import os
import sys
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent
VENV = BASE_DIR / ".venv"


def use_checkout_venv() -> None:
    """Re-execute this script with `.venv/bin/python` unless it already runs there (or there is none)."""
    venv_python = VENV / "bin" / "python"
    if not venv_python.exists() or Path(sys.prefix).resolve() == VENV.resolve():
        return
    os.execv(str(venv_python), [str(venv_python), str(BASE_DIR / "manage.py"), *sys.argv[1:]])


def main() -> None:
    use_checkout_venv()
    try:
        from django.core.exceptions import ImproperlyConfigured
        from django.core.management import execute_from_command_line
    except ImportError:
        sys.exit(f"Django is not installed for {sys.executable} and there is no {VENV}: run `make install` first.")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "osmo_site.settings")
    try:
        execute_from_command_line(sys.argv)
        sys.stdout.flush()
    except ImproperlyConfigured as exc:
        # A setting that is missing or cannot be parsed: the message says which, a traceback would bury it.
        sys.exit(f"manage.py: {exc}")
    except BrokenPipeError:
        # The reader stopped early (`./manage.py resource list | head`): not an error of the command.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


if __name__ == "__main__":
    main()

"""Strict readers for settings that come from the environment, or from the data directory's settings file.

A typo in a deployment's environment should stop the process at start-up, not surface later
as a silently ignored flag.

The settings file (`<OSMO_DATA_DIR>/env`, or `OSMO_ENV_FILE`) holds `KEY=VALUE` lines; `make install`
writes one for the local demo (`python -m osmo_site.env`). A variable set in the environment wins over
the file, one variable at a time.
"""

import os
import re
import secrets
import sys
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
_FILE_VALUES: dict[str, str] = {}
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Where the file is found cannot itself come from the file.
_ENVIRONMENT_ONLY = ("OSMO_DATA_DIR", "OSMO_ENV_FILE")


def data_dir() -> Path:
    return Path(os.environ.get("OSMO_DATA_DIR") or BASE_DIR / ".data")


def env_file_path() -> Path | None:
    """`OSMO_ENV_FILE` when set (empty: no file), else `<data dir>/env`."""
    value = os.environ.get("OSMO_ENV_FILE")
    if value is None:
        return data_dir() / "env"
    return Path(value) if value else None


def parse_env_file(text: str, path: Path) -> dict[str, str]:
    """`KEY=VALUE` lines; blank lines and `#` comments are skipped; a value may be quoted with ' or "."""
    values = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not _KEY.fullmatch(key):
            raise ImproperlyConfigured(f"{path}, line {number}: expected KEY=VALUE, not {line!r}")
        if key in _ENVIRONMENT_ONLY:
            raise ImproperlyConfigured(f"{path}, line {number}: {key} can only be set in the environment")
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        values[key] = value
    return values


def load_env_file(path: Path | None) -> None:
    """Use the file's values for the variables the environment does not set (a missing file is no error)."""
    _FILE_VALUES.clear()
    if path is None:
        return
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return
    except (OSError, UnicodeDecodeError) as exc:
        raise ImproperlyConfigured(f"cannot read the settings file {path}: {exc}") from None
    _FILE_VALUES.update(parse_env_file(text, path))


def write_local_env_file(path: Path) -> bool:
    """The local demo's settings file: DEBUG on and a generated SECRET_KEY, readable by its owner only.
    Leaves an existing file alone; answers whether it wrote one."""
    if path.exists():
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    text = (
        "# Settings for this checkout, written once by `make install`. Variables set in the environment win.\n"
        "# DEBUG=1 suits the local demo only: remove it (and set ALLOWED_HOSTS) before serving anyone else.\n"
        "DEBUG=1\n"
        f"SECRET_KEY={secrets.token_urlsafe(50)}\n"
    )
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(text)
    return True


def _get(name: str) -> str | None:
    value = os.environ.get(name)
    return _FILE_VALUES.get(name) if value is None else value

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str | None = None) -> str | None:
    value = _get(name)
    return default if value is None else value


def env_bool(name: str, default: bool = False) -> bool:
    value = _get(name)
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={value!r} is not a boolean; use one of 1/0, true/false, yes/no, on/off")


def env_list(name: str, default: list[str]) -> list[str]:
    value = _get(name)
    if value is None:
        return default
    return [item.strip() for item in value.split(",") if item.strip()]


def env_int(name: str, default: int) -> int:
    value = _get(name)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not an integer") from None


def main() -> None:
    """`python -m osmo_site.env`: write the local settings file unless it exists (`make install` runs this)."""
    path = env_file_path()
    if path is None:
        sys.exit("OSMO_ENV_FILE is empty: no settings file to write")
    if write_local_env_file(path):
        print(f"Wrote {path} (DEBUG=1 and a generated SECRET_KEY for the local demo)")
    else:
        print(f"Kept {path}")


if __name__ == "__main__":
    main()

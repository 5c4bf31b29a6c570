"""The name rule every stored object follows (pools, platforms, templates, roles, tokens)."""

from django.core.validators import RegexValidator
from django.db import models

from pools.engine import NAME_MAX_LENGTH, NAME_PATTERN

name_validator = RegexValidator(
    NAME_PATTERN,
    message="Names start with a letter, end with a letter or digit, and use only letters, digits, _ . -",
)


def name_field(**kwargs) -> models.CharField:
    return models.CharField(max_length=NAME_MAX_LENGTH, validators=[name_validator], **kwargs)

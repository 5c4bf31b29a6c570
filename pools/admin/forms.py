"""Form fields for the admin's JSON and ordered-name inputs. Errors come from the same parser and
write path as the CLI and API."""

import json
import re

from django import forms

from pools.engine import ConfigError, parse_json

_JSON_WIDGET = forms.Textarea(attrs={"rows": 8, "cols": 80, "class": "osmo-json", "spellcheck": "false"})


class JSONDocumentField(forms.JSONField):
    """Malformed JSON is reported with its line and column."""

    widget = _JSON_WIDGET

    def __init__(self, *, empty=None, **kwargs):
        # What a blank optional field means: {} or [] for the document fields, never None.
        self.empty = empty
        super().__init__(**kwargs)

    def to_python(self, value):
        if value in self.empty_values and self.empty is not None:
            return self.empty()
        if self.disabled or value in self.empty_values:
            return super().to_python(value)
        if isinstance(value, (list, dict, int, float)):
            return value
        try:
            return parse_json(value, source="This JSON")
        except ConfigError as exc:
            raise forms.ValidationError(exc.message, code="invalid") from None

    def prepare_value(self, value):
        if isinstance(value, str):  # the user's own text, kept as typed when the form is shown again
            return value
        return json.dumps(value, indent=2, ensure_ascii=False)

    def bound_data(self, data, initial):
        return data


class NameListField(forms.CharField):
    """An ordered list of names typed one per line or comma separated; order is kept."""

    def __init__(self, **kwargs):
        kwargs.setdefault("required", False)
        kwargs.setdefault("widget", forms.Textarea(attrs={"rows": 2, "cols": 60}))
        super().__init__(**kwargs)

    def prepare_value(self, value):
        if isinstance(value, list):
            return ", ".join(value)
        return value

    def to_python(self, value):
        text = super().to_python(value) or ""
        return [part.strip() for part in re.split(r"[,\n]", text) if part.strip()]

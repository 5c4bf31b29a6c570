"""`/usage/`, under the `usage` namespace (one entry, `usage:*`, in the access matrix)."""

from django.urls import path

from scheduling.pages import usage as page

app_name = "usage"

urlpatterns = [path("", page.usage_page, name="page")]

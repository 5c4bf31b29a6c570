"""The site's URLs plus two views under /api/ that answer as plain Django views do: one raises (a 500), one
answers only GET (Django's empty 405). For tests/test_errors.py, through ROOT_URLCONF."""

from django.http import HttpResponse
from django.urls import include, path
from django.views import View


def boom(request):
    raise RuntimeError("a server error under /api/")


class OnlyGet(View):
    def get(self, request):
        return HttpResponse("ok", content_type="text/plain")


urlpatterns = [
    path("api/test-boom", boom),
    path("api/test-only-get", OnlyGet.as_view()),
    path("", include("osmo_site.urls")),
]

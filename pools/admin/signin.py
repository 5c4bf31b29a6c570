"""The admin's sign-in under the sign-in limit says so, as the sign-in page does: our message ("Too many failed
sign-ins ...: try again in N minutes") instead of Django's "enter a correct username and password", and 429
with Retry-After."""

from django.contrib import admin
from django.contrib.admin import AdminSite
from django.contrib.admin.forms import AdminAuthenticationForm

from pools.access.signin_limit import refusal_error


class AdminSignInForm(AdminAuthenticationForm):
    def get_invalid_login_error(self):
        return refusal_error(self.request) or super().get_invalid_login_error()


def login(request, extra_context=None):
    response = AdminSite.login(admin.site, request, extra_context)
    refused = getattr(request, "signin_refusal", None)
    if refused is not None and response.status_code == 200:
        response.status_code = 429
        response["Retry-After"] = str(refused.retry_after)
    return response


admin.site.login_form = AdminSignInForm
admin.site.login = login  # read by admin.site.get_urls(), when the URLs are first loaded (after this module)

"""The link of a notebook or inference (issue 43 point 3): an Ingress from the pool's (else the backend's) template,
accepted by the stand-in field by field, shown on the API, the page and the CLI to its submitter and staff only;
without a template the port-forward line; a template that cannot make an Ingress is refused by name."""

import io

import pytest
from django.core.management import call_command
from django.test import Client
from rest_framework.test import APIClient

from pools.cluster.kinds import INGRESS, SERVICE, STATEFULSET
from pools.engine import ConfigError
from scheduling.specs.ingress import parse_templates
from tests.scheduling.test_kinds import dispatched

pytestmark = pytest.mark.django_db
TEMPLATE = {"host": "{name}-{id}.nb.example.org", "path": "/", "tls_secret": "nb-wildcard-tls",
            "ingress_class": "nginx", "annotations": {"nginx.ingress.kubernetes.io/auth-url": "https://sso/auth"}}


def test_a_pool_template_makes_the_ingress_and_the_link(standin, kube, researcher_api, settings):
    settings.OSMO_LINK_TEMPLATES = {"pool/training": TEMPLATE, "backend/default": {"host": "other.example.org"}}
    workload = dispatched(researcher_api, kube, name="Explore_1", kind="notebook", project="nlp", priority="low")
    (ingress,) = standin.objects(INGRESS)
    (statefulset,) = standin.objects(STATEFULSET)
    (service,) = standin.objects(SERVICE)
    host = f"explore-1-{workload.short_id}.nb.example.org"
    assert ingress["metadata"]["name"] == service["metadata"]["name"] == workload.job_name
    assert ingress["metadata"]["annotations"] == TEMPLATE["annotations"]
    assert ingress["metadata"]["ownerReferences"][0]["uid"] == statefulset["metadata"]["uid"]
    assert ingress["spec"] == {
        "ingressClassName": "nginx", "tls": [{"hosts": [host], "secretName": "nb-wildcard-tls"}],
        "rules": [{"host": host, "http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": {"service": {
            "name": workload.job_name, "port": {"number": 8888}}}}]}}]}

    link = researcher_api.get(f"/api/workloads/{workload.pk}/").json()["link"]
    forward = f"kubectl port-forward -n {workload.namespace} service/{workload.job_name} 8888:8888"
    assert link == {"url": f"https://{host}/", "port_forward": forward}
    page = Client()
    page.force_login(workload.submitter)
    html = page.get(f"/workloads/{workload.pk}/").content.decode()
    assert f'href="https://{host}/"' in html and forward in html
    out = io.StringIO()
    call_command("workload", "describe", str(workload.pk), stdout=out)  # the operator's CLI
    assert f"Link:       https://{host}/" in out.getvalue() and forward in out.getvalue()


def test_only_the_submitter_and_staff_are_shown_the_link(standin, kube, researcher_api, world, staff, settings):
    settings.OSMO_LINK_TEMPLATES = {"backend/default": {"host": "{user}-{name}.apps.example.org"}}
    workload = dispatched(researcher_api, kube, name="serve", kind="inference", project="nlp", priority="low")
    teammate = APIClient()
    teammate.force_authenticate(world["other"])  # a member of nlp: sees the workload, not its address
    seen = teammate.get(f"/api/workloads/{workload.pk}/")
    assert seen.status_code == 200 and seen.json()["link"] is None
    page = Client()
    page.force_login(world["other"])
    html = page.get(f"/workloads/{workload.pk}/").content.decode()
    assert "apps.example.org" not in html and "port-forward" not in html
    out = io.StringIO()
    call_command("workload", "describe", str(workload.pk), "--as-user", "other", stdout=out)
    assert "Link:" not in out.getvalue()
    ops = APIClient()
    ops.force_authenticate(staff)
    assert ops.get(f"/api/workloads/{workload.pk}/").json()["link"]["url"] == "http://researcher-serve.apps.example.org/"


def test_without_a_template_the_page_shows_the_port_forward_line(standin, kube, researcher_api):
    workload = dispatched(researcher_api, kube, name="explore", kind="notebook", port=8080)
    assert standin.objects(INGRESS) == []
    link = researcher_api.get(f"/api/workloads/{workload.pk}/").json()["link"]
    assert link == {"url": "", "port_forward": f"kubectl port-forward -n {workload.namespace} "
                                               f"service/{workload.job_name} 8080:8080"}
    page = Client()
    page.force_login(workload.submitter)
    html = page.get(f"/workloads/{workload.pk}/").content.decode()
    assert "No link template" in html and "8080:8080" in html


@pytest.mark.parametrize("templates, field", [
    ({"pool": TEMPLATE}, "OSMO_LINK_TEMPLATES.pool"),
    ({"pool/a": {"path": "/"}}, "OSMO_LINK_TEMPLATES.pool/a.host"),
    ({"pool/a": {**TEMPLATE, "host": "{name}.Example.org"}}, "OSMO_LINK_TEMPLATES.pool/a.host"),
    ({"pool/a": {**TEMPLATE, "host": "{pool}.example.org"}}, "OSMO_LINK_TEMPLATES.pool/a.host"),
    ({"pool/a": {**TEMPLATE, "path": "nb"}}, "OSMO_LINK_TEMPLATES.pool/a.path"),
    ({"pool/a": {**TEMPLATE, "ingress_class": "Nginx_1"}}, "OSMO_LINK_TEMPLATES.pool/a.ingress_class"),
    ({"pool/a": {**TEMPLATE, "annotations": {"bad key!": "x"}}}, "OSMO_LINK_TEMPLATES.pool/a.annotations"),
    ({"pool/a": {**TEMPLATE, "colour": "red"}}, "OSMO_LINK_TEMPLATES.pool/a.colour")])
def test_a_template_that_cannot_make_an_ingress_is_refused_by_name(templates, field):
    with pytest.raises(ConfigError) as refused:
        parse_templates(templates)
    assert refused.value.field == field

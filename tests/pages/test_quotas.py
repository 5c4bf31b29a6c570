"""`/quotas/`: per pool, departments with their projects nested; a researcher sees only their projects; staff
edit one figure at a time (written through the configuration write path, refused in place); CSV."""

import csv
import io
import re

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from pools.config import writes
from pools.models import AuditEvent, ConfigKind, ConfigRevision, Pool, Project, Quota
from pools.pages.csv import neutralise
from pools.pages.tables import QUOTAS
from pools.quotas.fairshare import Resource
from pools.quotas.figures import quota_tables
from tests.pages import quota_world
from tests.pages.conftest import body, fragment
from tests.support.fleet import ALPHA, BRAVO, make_nodes

pytestmark = pytest.mark.django_db
EDIT = "/quotas/edit/"


def rows_of(text: str, pool: str) -> list[tuple[str, str]]:
    """(level, key) of each row in the section of `pool`."""
    start = text.index(f'data-pool="{pool}"')
    section = text[start:text.index("</section>", start)]
    return re.findall(r'<tr data-key="([^"]+)" data-testid="row" data-level="([^"]+)"', section)


def cell(text: str, key: str, column: str) -> str:
    row = re.search(rf'<tr data-key="{re.escape(key)}".*?</tr>', text).group(0)
    return re.search(rf'data-col="{column}"[^>]*>(.*?)</t[dh]>', row).group(1)


def read_csv(response) -> list[list[str]]:
    return list(csv.reader(io.StringIO(body(response))))


def edit(client, cell_key: str, value: str, **headers):
    return client.post(EDIT, {"cell": cell_key, "value": value}, **headers)


def htmx_edit(client, cell_key: str, value: str):
    return edit(client, cell_key, value, HTTP_HX_REQUEST="true")


# ---- what is shown ---------------------------------------------------------------------------------------

def test_staff_see_each_department_then_its_projects_nested_under_it(staff_client, projects_and_quotas):
    text = body(staff_client.get("/quotas/"))

    assert rows_of(text, ALPHA) == [(f"{ALPHA}/research/", "department"), (f"{ALPHA}/research/nlp", "project"),
                                    (f"{ALPHA}/research/vision", "project")]
    assert rows_of(text, BRAVO) == [(f"{BRAVO}/product/", "department"), (f"{BRAVO}/product/secret", "project")]
    assert re.findall(r'<th scope="col" data-col="([^"]+)"', text) == [
        "unit", "gpu_deserved", "gpu_limit", "gpu_weight", "gpu_allocated", "gpu_pending", "gpu_fair_share",
        "gpu_over_quota", "starved"] * 2
    vision = f"{ALPHA}/research/vision"
    assert 'value="6"' in cell(text, vision, "gpu_deserved")
    assert 'value="12"' in cell(text, vision, "gpu_limit")
    assert '<option value="High" selected>' in cell(text, vision, "gpu_weight")
    assert (cell(text, vision, "gpu_allocated"), cell(text, vision, "gpu_over_quota")) == ("8", "2")
    assert '<a href="/projects/vision/">vision</a>' in cell(text, vision, "unit")
    assert "2 borrowed" in text and "7 GPUs guaranteed" in text


def test_the_cpu_and_memory_columns_are_behind_the_column_chooser(staff_client, staff, projects_and_quotas):
    assert 'data-col="cpu_deserved"' not in body(staff_client.get("/quotas/"))
    assert staff_client.post("/tables/quotas/columns/", {"columns": ["unit", "memory_deserved", "cpu_fair_share"]}
                             ).status_code == 302  # the column chooser

    text = body(staff_client.get("/quotas/"))

    assert re.findall(r'<th scope="col" data-col="([^"]+)"', text)[:3] == ["unit", "memory_deserved",
                                                                          "cpu_fair_share"]
    assert 'id="qe-project-vision-alpha-pool-memory-deserved"' in text


def test_a_member_sees_only_their_own_projects_with_the_fair_share_staff_see(member_client, projects_and_quotas):
    text = body(member_client.get("/quotas/"))

    assert rows_of(text, ALPHA) == [(f"{ALPHA}/research/vision", "project")]
    for hidden in ("nlp", "secret", "product", BRAVO):
        assert hidden not in text
    assert "<form" not in text.split('id="quotas-table"')[1]  # read only
    (table,) = quota_tables([Pool.objects.get(name=ALPHA)])
    vision = next(row for row in table.rows if row.project == "vision").figures[Resource.GPU]
    shown = f"{ALPHA}/research/vision"
    assert (cell(text, shown, "gpu_deserved"), cell(text, shown, "gpu_limit"), cell(text, shown, "gpu_weight"),
            cell(text, shown, "gpu_fair_share")) == ("6", "12", "High", str(vision["fair_share"]))


def test_a_member_with_no_quota_anywhere_is_told_so(client, fleet, django_user_model):
    client.force_login(django_user_model.objects.create_user("newcomer"))

    text = body(client.get("/quotas/"))

    assert "None of your projects has a quota or running work" in text


def test_a_pool_whose_departments_deserve_more_than_its_capacity_is_flagged(staff_client, projects_and_quotas):
    writes.import_document(ConfigKind.DEPARTMENT, {"name": "research", "resources": [
        {"node_pool": ALPHA, "gpu": {"deserved": 20}}]}, author="tests")

    text = body(staff_client.get("/quotas/"))

    flags = re.findall(r'data-testid="over-subscribed"[^>]*>([^<]+)<', text)
    assert flags == ["over-subscribed by 4 GPUs"]  # 20 deserved, 16 GPUs on Ready nodes
    assert text.index("over-subscribed by") < text.index(f'data-pool="{BRAVO}"')


def test_usage_counted_in_several_pools_is_said_so(staff_client, projects_and_quotas):
    make_nodes(1, [ALPHA, BRAVO], prefix="shared", start=1)
    quota_world.pods("proj-vision", "shared-0001", 1)  # no pool label, on a node of both pools

    text = body(staff_client.get("/quotas/"))
    rows = read_csv(staff_client.get("/quotas/?export=csv"))

    assert "counted in several pools" in cell(text, f"{ALPHA}/research/vision", "unit")
    assert "counted in several pools" in cell(text, f"{BRAVO}/research/vision", "unit")
    shared = {(row[0], row[2]): row[-1] for row in rows[1:]}
    assert shared[(ALPHA, "vision")] == shared[(BRAVO, "vision")] == "true"
    assert shared[(ALPHA, "nlp")] == "false"


def test_the_filters_narrow_the_rows_and_the_pools(staff_client, projects_and_quotas):
    by_department = body(staff_client.get("/quotas/?department=product"))
    by_text = body(staff_client.get("/quotas/?q=visi"))
    by_pool = body(staff_client.get(f"/quotas/?pool={BRAVO}"))

    assert re.findall(r'data-testid="quota-pool" data-pool="([^"]+)"', by_department) == [BRAVO]
    assert [key for key, _ in rows_of(by_text, ALPHA)] == [f"{ALPHA}/research/vision"]
    assert re.findall(r'data-testid="quota-pool" data-pool="([^"]+)"', by_text) == [ALPHA]
    assert re.findall(r'data-testid="quota-pool" data-pool="([^"]+)"', by_pool) == [BRAVO]


def test_a_member_cannot_name_a_pool_they_may_not_use(member_client, projects_and_quotas):
    text = body(member_client.get(f"/quotas/?pool={BRAVO}"))

    assert "No quota matches these filters." in text
    assert f'data-pool="{BRAVO}"' not in text and "product" not in text


def test_pools_come_a_page_at_a_time(staff_client, projects_and_quotas):
    first = body(staff_client.get("/quotas/?per_page=5"))
    names = sorted(Pool.objects.values_list("name", flat=True))
    # By hand: a pool written through the configuration re-derives every node's memberships from the platforms,
    # and this fleet's memberships are make_nodes' rows (tests/support/fleet.py), which it would rewrite.
    for index in range(6):
        Pool.objects.create(name=f"zz-{index}", backend=Pool.objects.get(name=ALPHA).backend)

    paged = body(staff_client.get("/quotas/?per_page=5&page=2"))

    assert re.findall(r'data-testid="quota-pool" data-pool="([^"]+)"', first) == names
    assert re.findall(r'data-testid="quota-pool" data-pool="([^"]+)"', paged) == ["zz-2", "zz-3", "zz-4", "zz-5"]
    assert "page 2 of 2" in paged


def test_a_live_refresh_answers_only_the_quota_region(staff_client, projects_and_quotas):
    response = fragment(staff_client, "/quotas/", target="quotas-table")

    text = body(response)
    assert text.lstrip().startswith('<div id="quotas-table"')
    assert "<html" not in text
    assert "HX-Request" in response["Vary"]


def test_a_member_sees_their_projects_in_the_pool_page_s_quota_table(member_client, projects_and_quotas):
    member_text = body(member_client.get(f"/pools/{ALPHA}/"))
    assert rows_of(member_text, ALPHA) == [(f"{ALPHA}/research/vision", "project")]
    assert "nlp" not in member_text


def test_staff_see_the_pool_page_s_quota_table_with_every_row(client, staff, projects_and_quotas):
    client.force_login(staff)

    text = body(client.get(f"/pools/{ALPHA}/"))

    assert [key for key, _ in rows_of(text, ALPHA)] == [f"{ALPHA}/research/", f"{ALPHA}/research/nlp",
                                                        f"{ALPHA}/research/vision"]
    assert f'hx-get="/quotas/?pool={ALPHA}"' in text


# ---- CSV -------------------------------------------------------------------------------------------------

def test_the_csv_holds_every_row_with_its_pool_department_and_project(staff_client, projects_and_quotas):
    rows = read_csv(staff_client.get("/quotas/?export=csv&cols=gpu_deserved,gpu_limit,gpu_weight,memory_limit"))

    assert rows[0] == ["Pool", "Department", "Project", "GPU deserved", "GPU limit", "GPU weight",
                       "Memory limit (bytes)", "Shared usage"]
    assert rows[1:] == [[ALPHA, "research", "", "10", "-1", "Medium", "-1", "false"],
                        [ALPHA, "research", "nlp", "4", "-1", "Medium", "-1", "false"],
                        [ALPHA, "research", "vision", "6", "12", "High", "-1", "false"],
                        [BRAVO, "product", "", "8", "-1", "Medium", "-1", "false"],
                        [BRAVO, "product", "secret", "8", "-1", "Medium", "-1", "false"]]


def test_the_csv_of_every_page_is_every_pool_and_only_the_member_s_rows(member_client, projects_and_quotas):
    rows = read_csv(member_client.get("/quotas/?export=csv&page=7"))

    assert [row[:3] for row in rows[1:]] == [[ALPHA, "research", "vision"]]


def test_the_quota_csv_escapes_formula_cells_and_never_a_figure(staff_client, projects_and_quotas, monkeypatch):
    # Names cannot start with a formula character; weights come from a fixed list: what a cell could hold
    # if that changed is escaped all the same, and a limit of -1 stays a number.
    rows = read_csv(staff_client.get("/quotas/?export=csv"))
    assert rows[1][4] == "-1"
    text_columns = [column for column in QUOTAS.columns if not column.numeric and column.kind != "bool"]
    monkeypatch.setattr("pools.pages.quota_pages.flat_rows", lambda table: [
        {**{column.key: "=1+2" for column in text_columns}, "project": "@SUM(A1)", "department": "-2+3",
         "pool": "+cmd", "shared_usage": False, "starved": False,
         **{f"{r}_{k}": -1 for r in ("gpu", "cpu", "memory")
            for k in ("deserved", "limit", "allocated", "pending", "fair_share", "over_quota")}}])

    rows = read_csv(staff_client.get(f"/quotas/?export=csv&pool={ALPHA}"))

    assert rows[1][:6] == ["'+cmd", "'-2+3", "'@SUM(A1)", "-1", "-1", "'=1+2"]
    assert all(neutralise(text) == text for text in rows[1] if not text.lstrip("-").isdigit())


# ---- editing ---------------------------------------------------------------------------------------------

def revisions(kind=ConfigKind.PROJECT, name="vision"):
    return list(ConfigRevision.objects.filter(kind=kind, name=name).order_by("number"))


def test_a_staff_edit_of_one_cell_writes_the_project_s_document_as_a_revision(staff_client, staff, projects_and_quotas):
    before = revisions()

    response = htmx_edit(staff_client, f"project:vision:{ALPHA}:gpu:deserved", "5")

    assert response.status_code == 200
    assert Quota.objects.get(project__name="vision", pool__name=ALPHA).gpu_deserved == 5
    (revision,) = revisions()[len(before):]
    assert revision.author_name == staff.username
    audited = AuditEvent.objects.get(kind="config", object="PROJECT/vision", action="update")
    assert (audited.actor, audited.address) == (staff.username, "127.0.0.1")
    assert "gpu.deserved: " in audited.summary and "→ 5" in audited.summary
    assert revision.document["resources"][0]["gpu"] == {"deserved": 5, "limit": 12, "over_quota_weight": "High"}
    text = response.content.decode()
    assert text.startswith('<form class="quota-cell"') and 'value="5"' in text
    assert f"saved, revision {revision.number} of project vision" in text and 'hx-swap-oob="true"' in text
    assert "quotas-changed" in response["HX-Trigger"]


def test_each_field_and_resource_takes_the_units_the_page_shows(staff_client, projects_and_quotas):
    for cell_key, value in ((f"project:vision:{ALPHA}:gpu:limit", "none"),
                            (f"project:vision:{ALPHA}:gpu:over_quota_weight", "low"),
                            (f"project:vision:{ALPHA}:cpu:deserved", "1.5"),
                            (f"project:vision:{ALPHA}:memory:limit", "64Gi")):
        assert htmx_edit(staff_client, cell_key, value).status_code == 200, cell_key

    quota = Quota.objects.get(project__name="vision", pool__name=ALPHA)
    assert (quota.gpu_deserved, quota.gpu_limit, quota.gpu_weight) == (6, -1, 1)
    assert (quota.cpu_deserved, quota.memory_deserved, quota.memory_limit) == (1500, 0, 64 * 2**30)
    text = body(staff_client.get("/quotas/?cols=unit,cpu_deserved,memory_limit"))
    assert 'value="1.5"' in cell(text, f"{ALPHA}/research/vision", "cpu_deserved")
    assert 'value="64Gi"' in cell(text, f"{ALPHA}/research/vision", "memory_limit")


def test_a_new_quota_row_is_created_for_a_pool_the_project_had_none_in(staff_client, projects_and_quotas):
    response = htmx_edit(staff_client, f"project:nlp:{BRAVO}:gpu:deserved", "2")

    assert response.status_code == 200
    assert Quota.objects.get(project__name="nlp", pool__name=BRAVO).gpu_deserved == 2


def test_a_department_without_a_quota_keeps_what_it_deserves_when_its_limit_is_set(staff_client, projects_and_quotas):
    # product has no quota row in bravo: it deserves its projects' 8; setting the limit must not make it 0.
    response = htmx_edit(staff_client, f"department:product:{BRAVO}:gpu:limit", "10")

    assert response.status_code == 200
    quota = Quota.objects.get(department__name="product", pool__name=BRAVO)
    assert (quota.gpu_deserved, quota.gpu_limit) == (8, 10)


def test_a_refused_edit_is_shown_in_the_cell_and_writes_nothing(staff_client, projects_and_quotas):
    before = (ConfigRevision.objects.count(), list(Quota.objects.values_list("pk", "gpu_deserved", "gpu_limit")))
    audited = AuditEvent.objects.count()

    cases = {
        f"project:vision:{ALPHA}:gpu:deserved": ("-3", "is negative"),
        f"project:vision:{ALPHA}:gpu:limit": ("5", "deserved 6 is above its limit 5"),
        f"project:nlp:{ALPHA}:gpu:deserved": ("7", "its projects deserve 13 GPUs of pool alpha-pool, more than "
                                                   "the department's 10 GPUs"),
        f"project:vision:{ALPHA}:gpu:over_quota_weight": ("Huge", "is not an over-quota weight"),
        f"department:research:{ALPHA}:gpu:deserved": ("1.005", "more than two decimals"),
    }
    for cell_key, (value, message) in cases.items():
        response = htmx_edit(staff_client, cell_key, value)
        text = response.content.decode()
        assert response.status_code == 422, cell_key
        assert text.startswith('<form class="quota-cell"') and 'role="alert"' in text
        assert message in text.replace("&#x27;", "'"), text
        if "weight" not in cell_key:
            assert f'value="{value}"' in text  # what was typed stays, to be corrected
        assert "HX-Trigger" not in response

    assert (ConfigRevision.objects.count(),
            list(Quota.objects.values_list("pk", "gpu_deserved", "gpu_limit"))) == before
    assert AuditEvent.objects.count() == audited  # a refused write leaves no audit row


def test_without_javascript_an_edit_goes_back_to_the_page_with_a_message(staff_client, projects_and_quotas):
    saved = edit(staff_client, f"project:vision:{ALPHA}:gpu:deserved", "5", HTTP_REFERER="http://testserver/projects/")
    refused = edit(staff_client, f"project:vision:{ALPHA}:gpu:deserved", "-1", follow=True)

    assert (saved.status_code, saved["Location"]) == (302, "http://testserver/projects/")
    assert refused.redirect_chain[-1][0] == "/quotas/"
    assert "is negative" in body(refused).replace("&#x27;", "'")
    assert Quota.objects.get(project__name="vision", pool__name=ALPHA).gpu_deserved == 5


def test_a_pool_s_own_project_is_edited_through_the_pool_s_resources_gpu(staff_client, projects_and_quotas):
    document = writes.export(ConfigKind.POOL, ALPHA)["pools"][ALPHA]
    document["resources"] = {"gpu": {"guarantee": 2, "weight": 1}}
    writes.import_document(ConfigKind.POOL, {"pools": {ALPHA: document}}, author="tests")
    pool_revisions = len(revisions(ConfigKind.POOL, ALPHA))

    text = body(staff_client.get("/quotas/?cols=unit,gpu_deserved,cpu_deserved"))
    response = htmx_edit(staff_client, f"project:{ALPHA}:{ALPHA}:gpu:deserved", "3")
    refused = htmx_edit(staff_client, f"project:{ALPHA}:{ALPHA}:cpu:deserved", "3")

    assert 'id="qe-project-alpha-pool-alpha-pool-gpu-deserved"' in text
    assert 'id="qe-project-alpha-pool-alpha-pool-cpu-deserved"' not in text  # read only
    assert response.status_code == 200
    assert Pool.objects.get(name=ALPHA).resources["gpu"] == {"guarantee": 3, "weight": 1}
    assert Quota.objects.get(project__name=ALPHA, pool__name=ALPHA).gpu_deserved == 3
    assert len(revisions(ConfigKind.POOL, ALPHA)) == pool_revisions + 1
    assert refused.status_code == 422 and "resources.gpu" in refused.content.decode()


def test_the_edit_endpoint_is_for_staff_only(client, projects_and_quotas, alpha_member, django_user_model):
    cell_key = f"project:vision:{ALPHA}:gpu:deserved"
    anonymous = edit(client, cell_key, "1")
    client.force_login(alpha_member)
    member = htmx_edit(client, cell_key, "1")

    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/accounts/login/")
    assert member.status_code == 403
    assert client.get(EDIT).status_code in (403, 405)
    assert Quota.objects.get(project__name="vision", pool__name=ALPHA).gpu_deserved == 6


def test_the_edit_endpoint_needs_the_csrf_token(staff, projects_and_quotas):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(staff)
    cell_key = f"project:vision:{ALPHA}:gpu:deserved"

    forged = browser.post(EDIT, {"cell": cell_key, "value": "1"}, HTTP_HX_REQUEST="true")
    page = body(browser.get("/quotas/"))
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    genuine = browser.post(EDIT, {"cell": cell_key, "value": "1", "csrfmiddlewaretoken": token},
                           HTTP_HX_REQUEST="true")

    assert forged.status_code == 403
    assert genuine.status_code == 200
    assert Quota.objects.get(project__name="vision", pool__name=ALPHA).gpu_deserved == 1


def test_an_edit_naming_nothing_real_is_refused(staff_client, projects_and_quotas):
    assert htmx_edit(staff_client, "project:vision", "1").status_code == 400
    assert htmx_edit(staff_client, f"project:nobody:{ALPHA}:gpu:deserved", "1").status_code == 404
    missing_pool = htmx_edit(staff_client, "project:vision:no-such-pool:gpu:deserved", "1")
    assert missing_pool.status_code == 422 and "does not exist" in missing_pool.content.decode()


# ---- queries ---------------------------------------------------------------------------------------------

def grow(pools: int, projects: int):
    """`pools` pools and `projects` projects in two departments, each project with a quota in two pools and a
    pod in one, the alpha member belonging to every third."""
    backend = Pool.objects.get(name=ALPHA).backend
    names = [f"grow-{index:02d}" for index in range(pools)]
    # By hand: a pool written through the configuration re-derives every node's memberships from the platforms,
    # and this fleet's memberships are make_nodes' rows (tests/support/fleet.py), which it would rewrite.
    Pool.objects.bulk_create([Pool(name=name, backend=backend) for name in names])
    make_nodes(1, names, prefix=f"grow{pools}")
    writes.import_document(ConfigKind.DEPARTMENT, [{"name": "d1"}, {"name": "d2"}], author="tests")
    writes.import_document(ConfigKind.PROJECT, [quota_world.project_document(
        f"g{index}", f"d{index % 2 + 1}", {names[index % pools]: {"deserved": 1}, ALPHA: {"deserved": 0}},
        members={"roles": ["osmo-alpha"]} if index % 3 == 0 else {}) for index in range(projects)], author="tests")
    for index in range(projects):
        quota_world.pods(f"proj-g{index}", f"grow{pools}-0000", 1, pool=names[index % pools] if index % 2 else "")


@pytest.mark.parametrize("who", ["staff", "member"])
def test_the_quotas_page_makes_the_same_queries_whatever_the_number_of_pools_and_projects(
        client, staff, alpha_member, fleet, who):
    client.force_login(staff if who == "staff" else alpha_member)
    counts = []
    for pools, projects in ((2, 5), (20, 50)):
        Project.objects.filter(name__startswith="g").delete()
        Pool.objects.filter(name__startswith="grow-").delete()
        grow(pools, projects)
        for url in ("/quotas/?per_page=100", "/quotas/?q=g", "/quotas/?export=csv"):
            with CaptureQueriesContext(connection) as queries:
                response = client.get(url)
                body(response)
            counts.append((url, len(queries)))

    assert counts[:3] == counts[3:]
    assert max(count for _, count in counts) <= 16


# ---- the overview's GPUs guaranteed / borrowed -----------------------------------------------------------

def test_the_overview_shows_gpus_guaranteed_and_borrowed_as_the_quota_tables_count_them(staff_client,
        projects_and_quotas):
    make_nodes(1, [ALPHA, BRAVO], prefix="shared", start=1)
    quota_world.pods("proj-secret", "shared-0001", 3)  # no pool label: counted in both pools
    quota_world.pods("proj-secret", "b-0001", 10, pool=BRAVO)

    text = body(staff_client.get("/?sort=-gpu_borrowed"))
    rows = read_csv(staff_client.get("/?export=csv&cols=name,gpu_guaranteed,gpu_borrowed"))

    expected = {table.pool: table.guaranteed_gpus() for table in quota_tables(list(Pool.objects.all()))}
    # alpha: vision 8 of 6 deserved, nlp 1 of 4, secret's 3 unlabelled GPUs with no quota there: 7 within, 5 above.
    assert expected[ALPHA] == (7, 5) and expected[BRAVO] == (8, 5) and expected["default"] == (0, 0)
    assert rows[1:] == [[name, str(within), str(borrowed)] for name, (within, borrowed) in sorted(expected.items())]
    assert re.findall(r'<tr data-key="([^"]+)"', text) == [ALPHA, BRAVO, "default"]  # ties sort by name
    assert cell(text, BRAVO, "gpu_guaranteed") == "8" and cell(text, BRAVO, "gpu_borrowed") == "5"


@pytest.mark.parametrize("who", ["staff", "member"])
def test_the_overview_keeps_its_query_budget_with_quotas_and_pods(client, staff, alpha_member, fleet, who,
                                                                   django_assert_max_num_queries):
    client.force_login(staff if who == "staff" else alpha_member)
    quota_world.build()
    grow(20, 50)

    with django_assert_max_num_queries(10):
        assert client.get("/").status_code == 200
    with django_assert_max_num_queries(10):
        assert fragment(client, "/").status_code == 200

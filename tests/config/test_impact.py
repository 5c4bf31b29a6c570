"""A pool or template write reports the nodes and GPUs it moves between pools and the nodes it makes SHARED: the
pure comparison, then seed 002's pool pasted into the demo fleet (where it once made 76 nodes SHARED with
inference and simulation, silently) through the CLI and the API."""

import json

import pytest
from django.core.management import CommandError
from rest_framework.test import APIClient

from pools.config import writes
from pools.inventory.impact import placement_impact
from pools.models import ConfigKind, ConfigRevision, Node, PodTemplate, Pool
from tests.conftest import seed_json_blocks
from tests.support import commands
from tests.support.journey import config

SEED_POOL = "shared_simulation_training_pool"


# ---- the comparison (pure) -------------------------------------------------------------------------------

def test_it_counts_the_nodes_and_gpus_each_pool_gains_and_loses():
    before = {1: (["default"], 8), 2: (["default"], 4), 3: (["training"], 8)}
    after = {1: (["training"], 8), 2: (["default"], 4), 3: (["training"], 8)}

    impact = placement_impact(before, after)

    assert (impact.nodes_moved, impact.gpus_moved, impact.nodes_shared) == (1, 8, 0)
    assert impact.lines() == ["pool training: +1 node, +8 GPUs (1 -> 2 nodes, 8 -> 16 GPUs)",
                              "pool default: -1 node, -8 GPUs (2 -> 1 nodes, 12 -> 4 GPUs)"]


def test_it_names_the_pools_a_node_becomes_shared_with_on_both_sides():
    before = {1: (["a"], 8), 2: (["b"], 8), 3: (["default"], 2)}
    after = {1: (["a", "new"], 8), 2: (["b", "new"], 8), 3: (["new"], 2)}

    impact = placement_impact(before, after)

    assert (impact.nodes_moved, impact.gpus_moved, impact.nodes_shared, impact.gpus_shared) == (3, 18, 2, 16)
    lines = impact.lines()
    assert lines[0] == "pool new: +3 nodes, +18 GPUs (0 -> 3 nodes, 0 -> 18 GPUs); 2 nodes / 16 GPUs become SHARED " \
                       "with a, b"
    assert "pool a: keeps 1 node, 8 GPUs; 1 node / 8 GPUs become SHARED with new" in lines
    assert "pool default: -1 node, -2 GPUs (1 -> 0 nodes, 2 -> 0 GPUs)" in lines
    assert impact.headline() == "3 nodes (18 GPUs) change pools; 2 nodes (16 GPUs) become SHARED."


def test_a_node_shared_before_with_the_same_pools_is_not_reported_again():
    before = {1: (["a", "b"], 8)}

    assert placement_impact(before, {1: (["a", "b"], 8)}).pools == ()
    leaving = placement_impact(before, {1: (["a"], 8)})
    assert (leaving.nodes_moved, leaving.nodes_shared) == (1, 0)
    assert leaving.lines() == ["pool b: -1 node, -8 GPUs (1 -> 0 nodes, 8 -> 0 GPUs)"]


def test_pools_the_reader_may_not_see_are_counted_never_named():
    impact = placement_impact({1: (["secret"], 8), 2: (["mine"], 8)},
                              {1: (["secret", "new"], 8), 2: (["mine", "new"], 8)})

    shown = impact.visible(lambda pool: pool in {"new", "mine"})

    assert "secret" not in json.dumps(shown.as_dict())
    assert shown.lines()[0].endswith("become SHARED with mine, 1 other pool")
    assert [change.pool for change in shown.pools] == ["new", "mine"]


def test_the_confirmation_token_changes_with_the_impact():
    one = placement_impact({1: (["a"], 8)}, {1: (["a", "b"], 8)})
    other = placement_impact({1: (["a"], 4)}, {1: (["a", "b"], 4)})

    assert one.token() == placement_impact({1: (["a"], 8)}, {1: (["a", "b"], 8)}).token() != other.token()


# ---- seed 002's pool on the demo fleet ---------------------------------------------------------------------

def seed_pool_file(tmp_path) -> str:
    path = tmp_path / "platform_config.json"
    path.write_text(seed_json_blocks("002")[2])
    return str(path)


def run(*args) -> str:
    return commands.run("config", "--author", "tests", *args)


def expected_shared() -> tuple[int, int]:
    """The demo nodes seed 002's platforms select (L40S, and A100 nodes, which carry its taint) that are in
    another pool already: these become SHARED."""
    nodes = Node.objects.filter(gpu_product__in=["NVIDIA-L40S", "NVIDIA-A100-SXM4-80GB"]).exclude(
        pool_names=["default"])
    return nodes.count(), sum(nodes.values_list("gpu_total", flat=True))


def test_the_cli_refuses_seed_002_s_pool_without_yes_and_says_what_it_would_share(demo_fleet, tmp_path):
    shared_nodes, shared_gpus = expected_shared()
    assert shared_nodes > 0

    with pytest.raises(CommandError) as refused:
        run("update", "POOL", "--file", seed_pool_file(tmp_path))

    message = str(refused.value)
    assert message.startswith("Nothing written: ")
    assert f"{shared_nodes} nodes ({shared_gpus} GPUs) become SHARED" in message
    assert f"pool {SEED_POOL}: +" in message and "become SHARED with inference, simulation" in message
    assert "--yes" in message and "\n" not in message
    assert not Pool.objects.filter(name=SEED_POOL).exists()
    assert not ConfigRevision.objects.filter(name=SEED_POOL).exists()
    assert not Node.objects.filter(pool_names__contains=[SEED_POOL]).exists()


def test_a_dry_run_prints_the_impact_and_writes_nothing(demo_fleet, tmp_path):
    out = run("update", "POOL", "--file", seed_pool_file(tmp_path), "--dry-run")

    assert out.startswith(f"Dry run, nothing written. POOL: created {SEED_POOL}\n")
    assert f"\n  pool {SEED_POOL}: +" in out and "\n  pool inference: keeps " in out
    assert not Pool.objects.filter(name=SEED_POOL).exists()


def test_with_yes_the_cli_writes_it_and_prints_the_impact(demo_fleet, tmp_path):
    shared_nodes, _ = expected_shared()

    out = run("update", "POOL", "--file", seed_pool_file(tmp_path), "--yes")

    assert out.startswith(f"POOL: created {SEED_POOL} (revision ")
    assert f"{shared_nodes} nodes (" in out and "become SHARED with inference, simulation" in out
    assert Node.objects.filter(pool_names__contains=[SEED_POOL], sharing="SHARED").count() == shared_nodes


def test_a_write_that_shares_nothing_needs_no_yes_and_prints_no_impact(demo_fleet, tmp_path):
    path = tmp_path / "training.json"
    path.write_text(json.dumps(writes.export(ConfigKind.POOL, "training")))
    assert run("update", "POOL", "training", "--file", str(path)) == "POOL: unchanged training\n"
    assert run("update", "POOL", "training", "--file", str(path), "--dry-run").endswith(
        "Nodes: No node changes pools.\n")


def test_deleting_a_pool_reports_its_nodes_going_back_to_default(demo_fleet):
    dev_nodes = Node.objects.filter(pool_names=["dev"]).count()
    assert dev_nodes

    out = run("delete", "POOL", "dev")

    assert f"pool dev: -{dev_nodes} node" in out and "pool default: +" in out


def test_the_api_answers_the_impact_and_a_dry_run_writes_nothing(demo_fleet, api):
    document = json.loads(seed_json_blocks("002")[2])
    shared_nodes, shared_gpus = expected_shared()

    dry = api.put(f"/api/configs/pool/{SEED_POOL}/?dry_run=1", document, format="json")

    assert dry.status_code == 200, dry.content
    body = dry.json()
    assert body["dry_run"] is True and body["created"] == [SEED_POOL] and body["revisions"] == []
    assert (body["impact"]["nodes_shared"], body["impact"]["gpus_shared"]) == (shared_nodes, shared_gpus)
    assert body["impact"]["pools"][0]["pool"] == SEED_POOL
    assert not Pool.objects.filter(name=SEED_POOL).exists()

    done = api.put(f"/api/configs/pool/{SEED_POOL}/", document, format="json")

    assert done.status_code == 200 and "dry_run" not in done.json()
    assert done.json()["impact"]["nodes_shared"] == shared_nodes and done.json()["revisions"]
    assert Pool.objects.filter(name=SEED_POOL).exists()


def test_a_role_holder_s_answer_names_only_the_pools_they_may_see(demo_fleet, member):
    config("ROLE", {"name": "osmo-inference", "policies": [{"actions": [
        {"base": "http", "path": "/api/configs/pool/*", "method": "*"},
        {"base": "http", "path": "/api/pool/inference*", "method": "post"}]}]})
    commands.run("user", "add-role", member.get_username(), "osmo-inference")
    client = APIClient()
    client.force_authenticate(member)

    answer = client.put(f"/api/configs/pool/{SEED_POOL}/?dry_run=1", json.loads(seed_json_blocks("002")[2]),
                        format="json")

    assert answer.status_code == 200, answer.content
    text = json.dumps(answer.json())
    assert "simulation" not in text.replace(SEED_POOL, "")
    assert {change["pool"] for change in answer.json()["impact"]["pools"]} == {SEED_POOL, "inference", "default"}
    assert answer.json()["impact"]["pools"][0]["shared_with"] == ["inference", "1 other pool"]


# ---- the admin's confirmation step ----------------------------------------------------------------------------

def overlapping_pool_data(client) -> dict:
    """The admin's add-pool form for a pool whose one platform selects every H100 node, as training and dev do."""
    from tests.test_admin import new_pool_data

    data = new_pool_data(client, name="overlap", default_platform="gpu")
    data.update({"name": "overlap", "common_pod_template": "default_user", "platforms-0-override_pod_template": "h100",
                 "platforms-0-resource_validations": ""})
    return data


def test_the_admin_shows_the_impact_and_saves_only_once_confirmed(demo_fleet, client, staff):
    client.force_login(staff)
    h100 = Node.objects.filter(gpu_product="NVIDIA-H100-80GB-HBM3")
    data = overlapping_pool_data(client)

    held = client.post("/admin/pools/pool/add/", data)

    assert held.status_code == 200
    page = held.content.decode()
    assert 'id="impact-confirm"' in page and "Please correct the error" not in page
    impact = held.context["impact"]
    assert impact.nodes_shared == h100.exclude(pool_names=["default"]).count() > 0
    assert "pool overlap: +" in page and "become SHARED with dev, training" in page
    assert f'name="confirm_impact" value="{impact.token()}"' in page
    assert 'name="csrfmiddlewaretoken"' in page
    assert not Pool.objects.filter(name="overlap").exists()

    wrong = client.post("/admin/pools/pool/add/", {**data, "confirm_impact": "not-the-token"})
    assert wrong.status_code == 200 and not Pool.objects.filter(name="overlap").exists()

    saved = client.post("/admin/pools/pool/add/", {**data, "confirm_impact": impact.token()})

    assert saved.status_code == 302, saved.content.decode()[:2000]
    assert ConfigRevision.objects.filter(kind=ConfigKind.POOL, name="overlap", action="create").exists()
    assert h100.filter(pool_names__contains=["overlap"]).count() == h100.count()


def test_an_admin_edit_that_moves_no_node_saves_at_once(demo_fleet, client, staff):
    from tests.test_admin import form_data

    client.force_login(staff)
    pool = Pool.objects.get(name="dev")
    data = form_data(client.get(f"/admin/pools/pool/{pool.pk}/change/"))
    data["description"] = "Development, edited"

    saved = client.post(f"/admin/pools/pool/{pool.pk}/change/", data)

    assert saved.status_code == 302
    assert Pool.objects.get(name="dev").description == "Development, edited"


def test_the_admin_holds_a_pod_template_edit_that_moves_nodes_too(demo_fleet, client, staff, tmp_path):
    from tests.test_admin import form_data

    run("update", "POOL", "--file", seed_pool_file(tmp_path), "--yes")
    client.force_login(staff)
    template = PodTemplate.objects.get(name="l40s")
    url = f"/admin/pools/podtemplate/{template.pk}/change/"
    data = {**form_data(client.get(url)),
            "body": json.dumps({"spec": {"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}})}

    held = client.post(url, data)

    assert held.status_code == 200
    impact, page = held.context["impact"], held.content.decode()
    assert f"pool {SEED_POOL}: " in page and "become SHARED with dev, training" in page
    assert PodTemplate.objects.get(name="l40s").body == template.body

    saved = client.post(url, {**data, "confirm_impact": impact.token()})

    assert saved.status_code == 302
    assert Node.objects.filter(gpu_product="NVIDIA-H100-80GB-HBM3", pool_names__contains=[SEED_POOL]).exists()

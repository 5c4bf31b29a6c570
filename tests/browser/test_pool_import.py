"""In Chromium, on a laptop and on a phone: an admin edits a demo pool so that it overlaps the others, sees which
nodes would become SHARED with which pools before anything is saved, confirms, and finds it saved; and rolls seed
002's pasted pool back to before its creation, which deletes it."""

import json
import os
import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from pools.config import writes
from pools.models import ConfigKind, ConfigRevision, Node, Pool
from tests.conftest import seed_json_blocks
from tests.support.browser import sign_in

pytestmark = pytest.mark.django_db(transaction=True)

SEED_POOL = "shared_simulation_training_pool"
SHOTS = Path(os.environ.get("OSMO_SHOTS", "/tmp/shots-config"))


@pytest.mark.parametrize("viewport", [(1440, 900), (390, 844)], ids=["laptop", "phone"])
def test_an_admin_sees_the_nodes_an_edit_would_share_confirms_and_it_is_saved(live_server, page, demo_fleet, staff,
                                                                              viewport, screenshot):
    page.set_viewport_size({"width": viewport[0], "height": viewport[1]})
    pool = Pool.objects.get(name="dev")
    h100 = Node.objects.filter(gpu_product="NVIDIA-H100-80GB-HBM3")
    in_training = h100.filter(pool_names__contains=["training"]).count()
    training = Node.objects.filter(pool_names__contains=["training"]).count()
    assert in_training and not h100.filter(pool_names__contains=["training", "dev"]).exists()
    sign_in(page, live_server, f"/admin/pools/pool/{pool.pk}/change/")

    # Without its own node selector, dev's h100 platform takes every H100 node: training's too.
    page.fill("#id_node_selector", "{}")
    page.locator("input[name=_save]").last.click()

    box = page.locator("#impact-confirm")
    expect(box).to_be_visible()
    expect(box).to_contain_text("Confirm: this change moves nodes between pools")
    expect(box).to_contain_text(f"pool training: keeps {training} nodes")
    expect(box).to_contain_text(f"{in_training} nodes / {in_training * 8} GPUs become SHARED with dev")
    expect(page.locator("#impact-headline")).to_contain_text("Nothing is saved yet")
    expect(page.locator("p.errornote")).to_have_count(0)
    shown = box.bounding_box()
    assert shown["x"] >= 0 and shown["x"] + shown["width"] <= viewport[0] + 1, shown
    box.scroll_into_view_if_needed()
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"pool-impact-{viewport[0]}.png"))
    if viewport[0] > 600:
        screenshot(page, "pool-impact")  # the README's picture
    assert Pool.objects.get(name="dev").node_selector == {"runwhere.ai/pool": "dev"}  # nothing saved yet

    page.locator("#impact-confirm-save").click()

    messages = page.locator("ul.messagelist")
    expect(messages).to_contain_text("was changed successfully")
    expect(messages).to_contain_text(f"{in_training} nodes ({in_training * 8} GPUs) become SHARED")
    page.screenshot(path=str(SHOTS / f"pool-impact-saved-{viewport[0]}.png"))
    assert Pool.objects.get(name="dev").node_selector == {}
    assert h100.filter(pool_names__contains=["training", "dev"]).count() == in_training
    assert ConfigRevision.objects.filter(kind="POOL", name="dev").count() == 2


@pytest.mark.parametrize("viewport", [(1440, 900), (390, 844)], ids=["laptop", "phone"])
def test_an_admin_rolls_a_pasted_pool_back_to_before_its_creation(live_server, page, demo_fleet, staff, viewport):
    page.set_viewport_size({"width": viewport[0], "height": viewport[1]})
    document = json.loads(seed_json_blocks("002")[2])
    writes.import_document(ConfigKind.POOL, document, author="tests")
    created = ConfigRevision.objects.get(kind="POOL", name=SEED_POOL)
    assert Node.objects.filter(pool_names__contains=[SEED_POOL]).exists()
    sign_in(page, live_server, f"/config/history/?name={SEED_POOL}")

    row = page.locator(f'tr[data-key="POOL-{created.number}"]')
    expect(row.locator('[data-col="number"]')).to_have_text(re.compile(rf"^pool r{created.number}(More)?\s*$"))
    row.get_by_role("link", name="Restore this version…").click()
    expect(page.locator(".empty-state")).to_contain_text("restoring it writes nothing")
    page.locator("#rollback-other").click()

    expect(page.locator("h1")).to_have_text(f"Undo revision {created.number} of pool {SEED_POOL}?")
    submit = page.locator("#rollback-submit")
    expect(submit).to_have_text(f"Delete {SEED_POOL}")
    moved = Node.objects.filter(pool_names__contains=[SEED_POOL]).count()
    expect(page.locator("#rollback-impact")).to_contain_text(f"pool {SEED_POOL}: -{moved} nodes")
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"rollback-creation-{viewport[0]}.png"))
    page.locator("#rollback-confirm").check()
    submit.click()

    expect(page.get_by_text(f"POOL: deleted {SEED_POOL}")).to_be_visible()
    page.screenshot(path=str(SHOTS / f"rollback-creation-done-{viewport[0]}.png"))
    assert not Pool.objects.filter(name=SEED_POOL).exists()
    assert not Node.objects.filter(pool_names__contains=[SEED_POOL]).exists()
    assert ConfigRevision.objects.filter(kind="POOL", name=SEED_POOL).order_by("-number").first().action == "delete"

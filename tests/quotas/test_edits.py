"""One quota figure at a time (pools/quotas/edits.py): which cell, what the typed text means, and the write."""

import pytest

from pools.config import writes
from pools.engine import ConfigError
from pools.models import ConfigKind, ConfigRevision, Pool, Quota
from pools.quotas.edits import Cell, document_value, set_figure

pytestmark = pytest.mark.django_db


@pytest.fixture
def training(defaults):
    writes.import_document(ConfigKind.POOL, {"pools": {
        "training": {"backend": "default", "platforms": {"h100": {}}, "resources": {"gpu": {"guarantee": 4}}},
        "inference": {"backend": "default", "platforms": {"h100": {}}}}}, author="tests")
    writes.import_document(ConfigKind.PROJECT, {"name": "vision", "resources": [
        {"node_pool": "training", "gpu": {"deserved": 2}}]}, author="tests")


@pytest.mark.parametrize("text", ["", "project:vision", "team:vision:training:gpu:deserved",
                                  "project:vision:training:tpu:deserved", "project:vision:training:gpu:share",
                                  "project:Bad Name:training:gpu:deserved"])
def test_a_cell_that_names_no_quota_figure_is_refused(text):
    with pytest.raises(ConfigError):
        Cell.parse(text)


def test_a_cell_reads_back_as_its_key_and_says_what_it_is():
    cell = Cell.parse("department:research:training:memory:over_quota_weight")

    assert cell.key == "department:research:training:memory:over_quota_weight"
    assert cell.label == "Memory weight of department research in pool training"


@pytest.mark.parametrize(("field", "text", "value"), [
    ("limit", "", -1), ("limit", " None ", -1), ("limit", "-1", -1), ("limit", "16", "16"),
    ("deserved", " 8 ", "8"), ("over_quota_weight", "high", "High"), ("over_quota_weight", "none", "None")])
def test_the_typed_text_becomes_what_the_document_takes(field, text, value):
    assert document_value(Cell("project", "vision", "training", "gpu", field), text) == value


@pytest.mark.parametrize(("field", "text"), [("deserved", ""), ("over_quota_weight", "Highest")])
def test_text_that_is_no_value_of_the_field_is_refused(field, text):
    with pytest.raises(ConfigError):
        document_value(Cell("project", "vision", "training", "gpu", field), text)


def test_setting_a_figure_writes_one_revision_of_the_owner_s_document(training, staff):
    before = ConfigRevision.objects.filter(kind=ConfigKind.PROJECT, name="vision").count()

    result = set_figure(Cell("project", "vision", "training", "cpu", "limit"), "32", author=staff)

    assert result.updated == ["vision"] and len(result.revisions) == 1
    assert ConfigRevision.objects.filter(kind=ConfigKind.PROJECT, name="vision").count() == before + 1
    quota = Quota.objects.get(project__name="vision", pool__name="training")
    assert (quota.gpu_deserved, quota.cpu_deserved, quota.cpu_limit) == (2, 0, 32_000)


def test_the_same_value_again_writes_nothing(training):
    result = set_figure(Cell("project", "vision", "training", "gpu", "deserved"), "2")

    assert result.unchanged == ["vision"] and result.revisions == []


def test_a_pool_s_own_project_takes_its_gpus_from_the_pool_document(training):
    set_figure(Cell("project", "training", "training", "gpu", "limit"), "6")
    set_figure(Cell("project", "training", "training", "gpu", "over_quota_weight"), "High")

    assert Pool.objects.get(name="training").resources == {"gpu": {"guarantee": 4, "maximum": 6, "weight": 3}}
    set_figure(Cell("project", "training", "training", "gpu", "limit"), "none")
    assert Pool.objects.get(name="training").resources == {"gpu": {"guarantee": 4, "weight": 3}}
    with pytest.raises(ConfigError, match=r"resources\.gpu"):
        set_figure(Cell("project", "training", "inference", "gpu", "deserved"), "1")

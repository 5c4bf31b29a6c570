"""The write path: cross-object rules, atomicity, history, diff and rollback."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from pools.config import history, writes
from pools.engine import ConfigError
from pools.models import Backend, ConfigKind, ConfigRevision, Platform, PodTemplate, Pool, ResourceValidation
from tests.support.commands import run

POOL, TEMPLATE, VALIDATION = ConfigKind.POOL, ConfigKind.POD_TEMPLATE, ConfigKind.RESOURCE_VALIDATION

pytestmark = pytest.mark.django_db


def pool_body(**fields):
    body = {
        "backend": "default",
        "common_pod_template": ["default_ctrl", "default_user"],
        "common_resource_validations": ["default_cpu", "default_memory"],
        "common_default_variables": {"USER_CPU": 1, "USER_GPU": 0, "USER_MEMORY": "1Gi", "USER_STORAGE": "1Gi"},
        "default_platform": "a100",
        "platforms": {"a100": {"override_pod_template": ["gpu_toleration"]}, "cpu": {}},
    }
    body.update(fields)
    return body


def write_pool(name="training", author="tests", **fields):
    return writes.import_document(POOL, {"pools": {name: pool_body(**fields)}}, author=author)


def snapshot():
    return (Pool.objects.count(), Platform.objects.count(), Backend.objects.count(), ConfigRevision.objects.count(),
            PodTemplate.objects.count(), ResourceValidation.objects.count())


def test_init_loads_the_reference_defaults_and_is_idempotent(defaults):
    assert set(PodTemplate.objects.values_list("name", flat=True)) == {"default_ctrl", "default_user",
                                                                        "gpu_toleration"}
    assert Pool.objects.get(name="default").backend.kind == Backend.Kind.SIMULATED
    before = snapshot()
    from pools.config.defaults import init_defaults

    assert init_defaults() == []
    assert snapshot() == before


def test_it_creates_a_pool_with_its_platforms_in_document_order(defaults):
    result = write_pool()
    assert result.created == ["training"] and len(result.revisions) == 1
    assert list(Platform.objects.filter(pool__name="training").values_list("name", flat=True)) == ["a100", "cpu"]


def test_it_refuses_references_to_templates_that_do_not_exist_and_writes_nothing(defaults):
    before = snapshot()
    with pytest.raises(ConfigError) as caught:
        write_pool(backend="new-cluster", platforms={"a100": {"override_pod_template": ["training_a100"]}})
    assert "platforms.a100.override_pod_template references POD_TEMPLATE" in caught.value.message
    assert "training_a100" in caught.value.message
    assert snapshot() == before


def test_it_refuses_references_to_validations_that_do_not_exist(defaults):
    with pytest.raises(ConfigError, match=r"common_resource_validations references RESOURCE_VALIDATION.*gpu_x"):
        write_pool(common_resource_validations=["default_cpu", "gpu_x"])


def test_a_document_with_one_bad_pool_changes_nothing(defaults):
    before = snapshot()
    document = {"pools": {"good": pool_body(), "bad": pool_body(default_platform="h100")}}
    with pytest.raises(ConfigError, match="bad"):
        writes.import_document(POOL, document)
    assert snapshot() == before


def test_it_registers_an_unknown_backend_unconnected(defaults):
    result = write_pool(backend="gpu-cluster-01")
    assert result.backends_created == ["gpu-cluster-01"]
    backend = Backend.objects.get(name="gpu-cluster-01")
    assert backend.kind == Backend.Kind.KUBERNETES and backend.kubeconfig_path == ""
    assert "not connected" in result.summary()


def test_topology_keys_need_a_kai_backend(defaults):
    keys = [{"key": "zone", "label": "topology.kubernetes.io/zone"}, {"key": "rack", "label": "example.com/rack"}]
    with pytest.raises(ConfigError) as caught:
        write_pool(topology_keys=keys)
    assert "KAI" in caught.value.message and caught.value.field == "training.topology_keys"
    run("backend", "add", "kai-cluster", "--simulated", "--scheduler", "kai")
    assert write_pool(backend="kai-cluster", topology_keys=keys).created == ["training"]


def test_a_backend_cannot_leave_kai_while_a_pool_uses_topology_keys(defaults):
    from django.core.exceptions import ValidationError

    run("backend", "add", "kai-cluster", "--simulated", "--scheduler", "kai")
    backend = Backend.objects.get(name="kai-cluster")
    write_pool(backend="kai-cluster", topology_keys=[{"key": "rack", "label": "example.com/rack"}])
    backend.scheduler = Backend.Scheduler.DEFAULT
    with pytest.raises(ValidationError, match="training"):
        backend.full_clean()


def test_it_refuses_rules_whose_operands_cannot_render_with_the_pools_variables(defaults):
    with pytest.raises(ConfigError) as caught:
        write_pool(common_default_variables={"USER_MEMORY": "1Gi"})
    message = caught.value.message
    assert "default_cpu" in message and "USER_CPU" in message and "platform 'a100'" in message


def test_a_platform_variable_can_supply_what_a_rule_needs(defaults):
    platforms = {"a100": {"default_variables": {"USER_CPU": 8}}}
    assert write_pool(common_default_variables={"USER_MEMORY": "1Gi"}, default_platform="a100", platforms=platforms)


def test_it_refuses_a_node_selector_using_a_variable_the_pool_does_not_define(defaults):
    writes.import_document(TEMPLATE, {"by_product": {"spec": {"nodeSelector": {"product": "{{ GPU_PRODUCT }}"}}}})
    with pytest.raises(ConfigError, match="GPU_PRODUCT"):
        write_pool(platforms={"a100": {"override_pod_template": ["by_product"]}})
    platforms = {"a100": {"override_pod_template": ["by_product"], "default_variables": {"GPU_PRODUCT": "A100"}}}
    write_pool(platforms=platforms)
    assert writes.effective("training")["platforms"]["a100"]["node_selector"] == {"product": "A100"}


def test_a_referenced_template_cannot_be_deleted_and_the_message_lists_its_users(defaults):
    write_pool()
    with pytest.raises(ConfigError) as caught:
        writes.delete(TEMPLATE, "gpu_toleration")
    assert "pool training platform a100 (override_pod_template)" in caught.value.message
    with pytest.raises(ConfigError) as caught:
        writes.delete(TEMPLATE, "default_user")
    assert "pool default (common_pod_template)" in caught.value.message
    assert "pool training (common_pod_template)" in caught.value.message
    assert PodTemplate.objects.filter(name="default_user").exists()


def test_a_referenced_validation_cannot_be_deleted(defaults):
    with pytest.raises(ConfigError, match="pool default"):
        writes.delete(VALIDATION, "default_gpu")


def test_an_unused_template_can_be_deleted_and_the_deletion_is_a_revision(defaults):
    writes.import_document(TEMPLATE, {"spare": {"spec": {}}})
    result = writes.delete(TEMPLATE, "spare", author="ops")
    revision = history.get_revision(TEMPLATE, result.revisions[0])
    assert revision.action == "delete" and revision.document == {"spec": {}} and revision.author_name == "ops"


def test_the_default_pool_cannot_be_deleted(defaults):
    with pytest.raises(ConfigError, match="default pool"):
        writes.delete(POOL, "default")
    assert Pool.objects.filter(name="default").exists()


def test_a_template_change_that_would_break_a_pool_is_refused(defaults):
    write_pool()
    broken = [{"operator": "LE", "left_operand": "{{USER_SHM}}", "right_operand": "{{K8_MEMORY}}"}]
    before = snapshot()
    with pytest.raises(ConfigError) as caught:
        writes.import_document(VALIDATION, {"default_memory": broken})
    assert "USER_SHM" in caught.value.message and "Pool 'default' refused" in caught.value.message
    assert snapshot() == before
    assert ResourceValidation.objects.get(name="default_memory").rules[0]["left_operand"] == "{{USER_MEMORY}}"


def test_an_unchanged_document_writes_no_revision(defaults):
    write_pool()
    result = write_pool()
    assert result.unchanged == ["training"] and result.revisions == []


def test_revisions_are_numbered_per_type_with_author_and_description(defaults, staff):
    first = write_pool(author=staff).revisions[0]
    second = writes.import_document(POOL, {"pools": {"training": pool_body(description="v2")}}, author=staff,
                                     description="bigger").revisions[0]
    assert second == first + 1
    revision = history.get_revision(POOL, second)
    assert (revision.author, revision.author_name, revision.description) == (staff, "ops", "bigger")
    assert revision.document["description"] == "v2"


def test_diff_compares_a_revision_with_the_previous_one_of_the_same_object(defaults):
    first = write_pool().revisions[0]
    second = write_pool(description="now described").revisions[0]
    text = history.unified_diff(POOL, second)
    assert '-  "description": "",' in text and '+  "description": "now described",' in text
    assert history.unified_diff(POOL, first, second) == text
    assert '+  "name": "training"' in history.unified_diff(POOL, first)


def test_rollback_restores_an_earlier_document_as_a_new_revision(defaults):
    first = write_pool().revisions[0]
    write_pool(description="changed", platforms={"cpu": {}}, default_platform="cpu")
    result = writes.rollback(POOL, first, author="ops")
    assert result.updated == ["training"]
    assert writes.export(POOL, "training")["pools"]["training"] == history.get_revision(POOL, first).document
    assert history.get_revision(POOL, result.revisions[0]).description == f"Rollback to revision {first}"


def test_rollback_to_a_deletion_deletes_and_rollback_before_it_restores(defaults):
    created = write_pool().revisions[0]
    deleted = writes.delete(POOL, "training").revisions[0]
    assert writes.rollback(POOL, created).created == ["training"]
    assert writes.rollback(POOL, deleted).deleted == ["training"]
    assert not Pool.objects.filter(name="training").exists()


def test_rollback_is_refused_when_the_old_document_no_longer_fits(defaults):
    writes.import_document(TEMPLATE, {"extra": {"spec": {}}})
    created = write_pool(common_pod_template=["extra"]).revisions[0]
    writes.delete(POOL, "training")
    writes.delete(TEMPLATE, "extra")
    with pytest.raises(ConfigError, match="extra"):
        writes.rollback(POOL, created)


def test_an_unknown_revision_is_reported_as_not_found(defaults):
    with pytest.raises(history.ConfigNotFound, match="no revision 999"):
        writes.rollback(POOL, 999)


def test_export_round_trips_through_import_unchanged(defaults):
    write_pool(default_exec_timeout="2h", max_exec_timeout="8h", node_selector={"example.com/pool": "training"},
               default_exit_actions={"FAIL": "1-255"})
    for kind in (POOL, TEMPLATE, VALIDATION):
        exported = writes.export(kind)
        result = writes.import_document(kind, exported)
        assert result.created == result.updated == [] and writes.export(kind) == exported


def test_effective_merges_templates_variables_and_rules_per_platform(defaults):
    write_pool(platforms={"a100": {"override_pod_template": ["gpu_toleration"],
                                   "default_variables": {"USER_GPU": 8},
                                   "resource_validations": ["default_gpu"]}, "cpu": {}})
    effective = writes.effective("training")["platforms"]
    a100 = effective["a100"]
    assert a100["node_selector"] == {"nvidia.com/gpu.present": "true"}
    assert a100["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert a100["variables"]["USER_GPU"] == 8 and effective["cpu"]["variables"]["USER_GPU"] == 0
    assert [c["name"] for c in a100["pod_template"]["spec"]["containers"]] == ["osmo-ctrl", "{{USER_CONTAINER_NAME}}"]
    assert len(a100["resource_validations"]) == 6 and len(effective["cpu"]["resource_validations"]) == 4
    assert effective["cpu"]["node_selector"] == {} and effective["cpu"]["tolerations"] == []


def test_removing_a_platform_from_the_document_deletes_it_and_keeps_the_others(defaults):
    write_pool()
    kept = Platform.objects.get(pool__name="training", name="cpu").pk
    write_pool(platforms={"cpu": {"description": "now alone"}}, default_platform="cpu")
    assert list(Platform.objects.filter(pool__name="training").values_list("pk", "name", "description")) == [
        (kept, "cpu", "now alone")
    ]


def test_import_query_count_does_not_grow_with_stored_pools_or_document_size(defaults):
    def queries(document) -> int:
        with CaptureQueriesContext(connection) as captured:
            writes.import_document(POOL, document)
        return len(captured)

    small = queries({"pools": {f"a{i}": pool_body() for i in range(3)}})
    writes.import_document(POOL, {"pools": {f"stored{i}": pool_body() for i in range(60)}})
    large = queries({"pools": {f"b{i}": pool_body() for i in range(30)}})
    assert small == large


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_writers_get_distinct_revision_numbers(defaults):
    import threading

    from django.db import connections

    errors, barrier = [], threading.Barrier(4)

    def writer(index: int) -> None:
        try:
            barrier.wait()
            writes.import_document(TEMPLATE, {f"t{index}": {"spec": {}}}, author=f"w{index}")
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    numbers = sorted(ConfigRevision.objects.filter(kind=TEMPLATE, name__startswith="t")
                     .values_list("number", flat=True))
    assert numbers == [4, 5, 6, 7]

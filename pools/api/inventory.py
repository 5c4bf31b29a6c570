"""`/api/pools/`, `/api/resources/`, `/api/nodes/`: the inventory as rows (see pools.fleet.usage for the
units), gpuctl's `label node` and kubectl's `cordon` over HTTP. Viewsets, routed by `pools.api.urls`."""

from django.http import Http404
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, viewsets
from rest_framework.response import Response

from pools.access.scoping import Rule
from pools.access.serializers import StrictBooleanField, StrictCharField, named, path_parameter, validated
from pools.fleet import labels, usage
from pools.fleet.cordon import cordon_node
from pools.fleet.filters import NodeFilterSet
from pools.inventory import node_events
from pools.models import Node, Pool
from pools.models.visibility import access_for

from .pagination import OptionalLimitOffsetPagination

CORES = "CPU in cores (decimal; 0.5 is 500m)"
BYTES = "bytes"
NODE_ORDER = ("name", "backend__name")  # as usage.node_rows lists them
POOL_NAME = named("name", "pool")
NODE_NAME = path_parameter("name", "The node's Kubernetes name.", max_length=253,
                           pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _cores(help_text: str) -> serializers.DecimalField:
    return serializers.DecimalField(max_digits=14, decimal_places=3, coerce_to_string=False, help_text=help_text)


class PoolRowSerializer(serializers.Serializer):
    name = serializers.CharField()
    description = serializers.CharField()
    status = serializers.ChoiceField(choices=usage.POOL_STATUSES,
                                     help_text="ONLINE: backend synced recently; OFFLINE: backend silent; "
                                               "MAINTENANCE: new submissions refused.")
    backend = serializers.CharField()
    node_count = serializers.IntegerField()
    gpu_total = serializers.IntegerField(help_text="GPUs in the pool's nodes (capacity).")
    gpu_used = serializers.IntegerField(help_text="GPUs requested by pods bound to the nodes and not finished.")
    gpu_free = serializers.IntegerField(help_text="Allocatable minus used, never below 0, summed over the nodes that "
                                                  "are Ready and not cordoned: what new work can use now.")
    gpu_free_not_ready = serializers.IntegerField(help_text="The same over the other nodes (not Ready, Unknown, "
                                                            "cordoned): free but not usable now.")
    gpu_unhealthy = serializers.IntegerField(help_text="Capacity minus allocatable.")
    cpu_total = _cores(f"Allocatable {CORES}.")
    cpu_used = _cores(f"Requested {CORES}.")
    memory_total = serializers.IntegerField(help_text=f"Allocatable memory in {BYTES}.")
    memory_used = serializers.IntegerField(help_text=f"Requested memory in {BYTES}.")
    platforms = serializers.ListField(child=serializers.CharField())


class PlatformFiguresSerializer(serializers.Serializer):
    name = serializers.CharField()
    node_count = serializers.IntegerField(help_text="Nodes of the pool on this platform.")
    gpu_total = serializers.IntegerField(help_text="GPUs in the platform's nodes (capacity).")
    gpu_used = serializers.IntegerField(help_text="GPUs requested by pods bound to them and not finished.")
    gpu_free = serializers.IntegerField(help_text="Allocatable minus used, never below 0, summed over the nodes that "
                                                  "are Ready and not cordoned: what new work can use now.")
    gpu_free_not_ready = serializers.IntegerField(help_text="The same over the other nodes (not Ready, Unknown, "
                                                            "cordoned): free but not usable now.")
    gpu_unhealthy = serializers.IntegerField(help_text="Capacity minus allocatable.")


class NodeRowSerializer(serializers.Serializer):
    node = serializers.CharField()
    backend = serializers.CharField()
    pools = serializers.ListField(child=serializers.CharField())
    platforms = serializers.ListField(child=serializers.CharField(), help_text="As pool/platform.")
    resource_type = serializers.ChoiceField(
        choices=Node.Sharing.choices,
        help_text="As OSMO's resource listing has it: RESERVED (in one pool), SHARED (in several), UNUSED (in none "
                  "but the default pool).")
    node_type = serializers.ChoiceField(choices=["GPU", "CPU"], help_text="GPU when the node has GPUs.")
    gpu_product = serializers.CharField(help_text="From GPU Feature Discovery (nvidia.com/gpu.product).")
    gpu_total = serializers.IntegerField()
    gpu_used = serializers.IntegerField()
    gpu_free = serializers.IntegerField()
    gpu_unhealthy = serializers.IntegerField()
    cpu_total = _cores(f"Allocatable {CORES}.")
    cpu_used = _cores(f"Requested {CORES}.")
    memory_total = serializers.IntegerField(help_text=f"Allocatable memory in {BYTES}.")
    memory_used = serializers.IntegerField(help_text=f"Requested memory in {BYTES}.")
    storage_total = serializers.IntegerField(help_text=f"Allocatable ephemeral storage in {BYTES}.")
    status = serializers.CharField(help_text="Ready, Cordoned (Ready, its only reason its cordon), Unknown, or "
                                               "'Not ready (<first reason>)'.")
    reasons = serializers.ListField(child=serializers.CharField(), help_text="Every reason, in order.")
    schedulable = serializers.BooleanField(help_text="False when cordoned.")
    taints = serializers.ListField(child=serializers.DictField())
    last_seen = serializers.DateTimeField(allow_null=True, help_text="The sync's last contact with the node's backend.")


class PoolDetailSerializer(PoolRowSerializer):
    platforms = PlatformFiguresSerializer(many=True, help_text="Per platform: nodes and GPU figures (a node on "
                                          "two platforms counts on each).")
    nodes = NodeRowSerializer(many=True)


class NodeEventSerializer(serializers.Serializer):
    at = serializers.DateTimeField()
    kind = serializers.ChoiceField(choices=node_events.KINDS)
    event = serializers.CharField(help_text="In one line, naming only the pools the caller may see.")


class NodeDetailSerializer(NodeRowSerializer):
    labels = serializers.DictField(child=serializers.CharField())
    conditions = serializers.ListField(child=serializers.DictField())
    components = serializers.DictField(help_text="NVIDIA operator components: running, missing, disabled, host.")
    gpu_allocatable = serializers.IntegerField()
    gpu_memory_mib = serializers.IntegerField()
    gpu_family = serializers.CharField()
    sharing = serializers.ChoiceField(choices=Node.Sharing.choices)
    events = NodeEventSerializer(many=True, help_text="Its recent events, newest first: appeared, status, cordon, "
                                                      "pools, left.")


class LabelRequestSerializer(serializers.Serializer):
    labels = serializers.DictField(child=StrictCharField(allow_null=True, allow_blank=True), allow_empty=False,
                                   help_text="KEY: VALUE sets, KEY: null removes; keys carry the managed prefix.")
    overwrite = StrictBooleanField(default=False, help_text="Needed to change a label's existing value.")

    def validate_labels(self, value):
        try:
            return labels.check_labels(value)
        except labels.LabelError as exc:
            key = exc.field.removeprefix("labels.") if exc.field.startswith("labels.") else None
            raise serializers.ValidationError({key: [exc.message]} if key else exc.message) from None


class LabelResultSerializer(serializers.Serializer):
    node = serializers.CharField()
    labels = serializers.DictField(child=serializers.CharField(), help_text="The node's labels after the change.")


class CordonRequestSerializer(serializers.Serializer):
    cordon = StrictBooleanField(required=False, default=True,
                                help_text="true (the default, also with no body): mark the node unschedulable "
                                          "(kubectl cordon); false: schedulable again (kubectl uncordon).")


BACKEND_PARAMETER = OpenApiParameter("backend", str, description="The node's backend, when two have a node of "
                                                                  "this name.")


def visible_pools(request):
    return Pool.objects.visible_to(request)


def visible_nodes(request):
    return Node.objects.visible_to(request)


class NodeFilterBackend(DjangoFilterBackend):
    # A value outside the viewer's choices matches no node (an empty list, as for a pool that does not
    # exist), rather than a 400 that would tell a pool one may not use from one that is not there.
    raise_exception = False


class InventoryViewSet(viewsets.GenericViewSet):
    """Reads for every signed-in user, rows scoped by `visible_to`; writes (labels) keep the default rule."""

    read_access = Rule.SIGNED_IN
    lookup_field = "name"
    lookup_value_regex = "[^/]+"
    pagination_class = OptionalLimitOffsetPagination

    def paged(self, queryset, order: tuple[str, ...]):
        """The queryset, or only its rows on the requested page (None: no page was asked for)."""
        keys = self.paginate_queryset(queryset.order_by(*order).values_list("pk", flat=True))
        return (queryset, None) if keys is None else (queryset.filter(pk__in=keys), keys)

    def answer(self, data, page):
        return Response(data) if page is None else self.get_paginated_response(data)


class PoolViewSet(InventoryViewSet):
    """`/api/pools/` and `/api/pools/{name}/`."""

    serializer_class = PoolRowSerializer

    def get_queryset(self):
        return visible_pools(self.request)

    @extend_schema(responses=PoolRowSerializer(many=True))
    def list(self, request):
        pools, page = self.paged(self.get_queryset(), ("name",))
        return self.answer(PoolRowSerializer(usage.pool_rows(pools), many=True).data, page)

    @extend_schema(responses=PoolDetailSerializer, parameters=[POOL_NAME])
    def retrieve(self, request, name):
        pool = visible_pools(request).filter(name=name).first()
        if pool is None:
            raise Http404(f"No pool named {name!r}")
        return Response(PoolDetailSerializer(usage.pool_detail(pool, visible_nodes(request),
                                                               access=access_for(request))).data)


class ResourceViewSet(InventoryViewSet):
    """`/api/resources/`: OSMO's resource listing, one row per node, filtered like the nodes page."""

    serializer_class = NodeRowSerializer
    filter_backends = [NodeFilterBackend]
    filterset_class = NodeFilterSet

    def get_queryset(self):
        return visible_nodes(self.request)

    @extend_schema(responses=NodeRowSerializer(many=True), parameters=[
        # Any reason is accepted, custom conditions too; the enumeration is only the standard ones.
        OpenApiParameter("status", str, description=NodeFilterSet.base_filters["status"].extra["help_text"])])
    def list(self, request):
        nodes, page = self.paged(self.filter_queryset(self.get_queryset()), NODE_ORDER)
        # The rows are already what NodeRowSerializer describes (the schema); running 5,000 of them through
        # its fields took as long again as reading them.
        return self.answer(list(usage.node_rows(nodes, access_for(request))), page)


class NodeViewSet(InventoryViewSet):
    """`/api/nodes/{name}/`, gpuctl's `label node` as `POST /api/nodes/{name}/labels` and kubectl's cordon as
    `POST /api/nodes/{name}/cordon` and `.../uncordon` (cluster writes: staff or an admin role, the default rule)."""

    serializer_class = NodeDetailSerializer

    def get_queryset(self):
        return visible_nodes(self.request)

    @extend_schema(responses=NodeDetailSerializer, parameters=[NODE_NAME])
    def retrieve(self, request, name):
        node = visible_nodes(request).select_related("backend").filter(name=name).first()
        if node is None:
            raise Http404(f"No node named {name!r}")
        return Response(NodeDetailSerializer(usage.node_detail(node, access_for(request))).data)

    @extend_schema(request=LabelRequestSerializer, responses=LabelResultSerializer,
                   parameters=[NODE_NAME, BACKEND_PARAMETER])
    def labels(self, request, name):
        body = validated(LabelRequestSerializer, request)
        if not visible_nodes(request).filter(name=name).exists():
            raise Http404(f"No node named {name!r}")
        result = labels.label_node(name, body["labels"], overwrite=body["overwrite"],
                                   backend=request.query_params.get("backend"))
        return Response({"node": name, "labels": result})

    @extend_schema(request=CordonRequestSerializer, responses=NodeDetailSerializer,
                   parameters=[NODE_NAME, BACKEND_PARAMETER],
                   description="Cordon (no body, or `{\"cordon\": true}`) or uncordon (`false`) the node: "
                               "`spec.unschedulable` is patched in the cluster, then recorded here. Answers the node "
                               "as now stored; its status reads `Cordoned` while cordoned. "
                               "Staff, or a role whose policies allow this POST.")
    def cordon(self, request, name):
        return self._cordon(request, name, validated(CordonRequestSerializer, request)["cordon"])

    @extend_schema(request=None, responses=NodeDetailSerializer, parameters=[NODE_NAME, BACKEND_PARAMETER],
                   description="Uncordon the node (kubectl uncordon), no body: `POST .../cordon` with "
                               "`{\"cordon\": false}` does the same. Answers the node as now stored.")
    def uncordon(self, request, name):
        return self._cordon(request, name, False)

    def _cordon(self, request, name, cordon: bool):
        if not visible_nodes(request).filter(name=name).exists():
            raise Http404(f"No node named {name!r}")
        node = cordon_node(name, cordon, backend=request.query_params.get("backend"))
        return Response(NodeDetailSerializer(usage.node_detail(node, access_for(request))).data)

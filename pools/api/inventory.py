"""`/api/pools/`, `/api/resources/`, `/api/nodes/`: the inventory as rows (see pools.usage for the units),
and gpuctl's `label node` over HTTP."""

from django.http import Http404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from pools.access.scoping import Rule
from pools.fleet import labels, usage
from pools.models import Node, Pool
from pools.models.visibility import access_for

CORES = "CPU in cores (decimal; 0.5 is 500m)"
BYTES = "bytes"


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
    gpu_free = serializers.IntegerField(help_text="Allocatable minus used, never below 0, summed over nodes.")
    gpu_unhealthy = serializers.IntegerField(help_text="Capacity minus allocatable.")
    cpu_total = _cores(f"Allocatable {CORES}.")
    cpu_used = _cores(f"Requested {CORES}.")
    memory_total = serializers.IntegerField(help_text=f"Allocatable memory in {BYTES}.")
    memory_used = serializers.IntegerField(help_text=f"Requested memory in {BYTES}.")
    platforms = serializers.ListField(child=serializers.CharField())


class PlatformCountSerializer(serializers.Serializer):
    name = serializers.CharField()
    node_count = serializers.IntegerField()


class NodeRowSerializer(serializers.Serializer):
    node = serializers.CharField()
    backend = serializers.CharField()
    pools = serializers.ListField(child=serializers.CharField())
    platforms = serializers.ListField(child=serializers.CharField(), help_text="As pool/platform.")
    resource_type = serializers.ChoiceField(choices=["GPU", "CPU"])
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
    status = serializers.CharField(help_text="Ready, Unknown, or 'Not ready (<first reason>)'.")
    reasons = serializers.ListField(child=serializers.CharField(), help_text="Every reason, in order.")
    schedulable = serializers.BooleanField(help_text="False when cordoned.")
    taints = serializers.ListField(child=serializers.DictField())
    last_seen = serializers.DateTimeField(allow_null=True)


class PoolDetailSerializer(PoolRowSerializer):
    platforms = PlatformCountSerializer(many=True)
    nodes = NodeRowSerializer(many=True)


class NodeDetailSerializer(NodeRowSerializer):
    labels = serializers.DictField(child=serializers.CharField())
    conditions = serializers.ListField(child=serializers.DictField())
    components = serializers.DictField(help_text="NVIDIA operator components: running, missing, disabled, host.")
    gpu_allocatable = serializers.IntegerField()
    gpu_memory_mib = serializers.IntegerField()
    gpu_family = serializers.CharField()
    sharing = serializers.ChoiceField(choices=Node.Sharing.choices)


class LabelRequestSerializer(serializers.Serializer):
    labels = serializers.DictField(child=serializers.CharField(allow_null=True),
                                   help_text="KEY: VALUE sets, KEY: null removes; keys carry the managed prefix.")
    overwrite = serializers.BooleanField(default=False)


def visible_pools(request):
    return Pool.objects.visible_to(request)


def visible_nodes(request):
    return Node.objects.visible_to(request)


class PoolListView(APIView):
    read_access = Rule.SIGNED_IN

    @extend_schema(responses=PoolRowSerializer(many=True))
    def get(self, request):
        return Response(PoolRowSerializer(usage.pool_rows(visible_pools(request)), many=True).data)


class PoolDetailView(APIView):
    read_access = Rule.SIGNED_IN

    @extend_schema(responses=PoolDetailSerializer)
    def get(self, request, name):
        pool = visible_pools(request).filter(name=name).first()
        if pool is None:
            raise Http404(f"No pool named {name!r}")
        return Response(PoolDetailSerializer(usage.pool_detail(pool, visible_nodes(request),
                                                               access=access_for(request))).data)


class ResourceListView(APIView):
    read_access = Rule.SIGNED_IN

    @extend_schema(
        parameters=[OpenApiParameter("pool"), OpenApiParameter("platform", description="name or pool/platform"),
                    OpenApiParameter("status", description="e.g. Ready, Unknown, Not ready")],
        responses=NodeRowSerializer(many=True),
    )
    def get(self, request):
        params, access = request.query_params, access_for(request)
        nodes = usage.filter_nodes(visible_nodes(request), pool=params.get("pool"),
                                   platform=params.get("platform"), status=params.get("status"), access=access)
        return Response(NodeRowSerializer(usage.node_rows(nodes, access), many=True).data)


class NodeDetailView(APIView):
    read_access = Rule.SIGNED_IN

    @extend_schema(responses=NodeDetailSerializer)
    def get(self, request, name):
        node = visible_nodes(request).select_related("backend").filter(name=name).first()
        if node is None:
            raise Http404(f"No node named {name!r}")
        return Response(NodeDetailSerializer(usage.node_detail(node, access_for(request))).data)


class NodeLabelsView(APIView):
    """A cluster write: staff or an admin role (the default rule)."""

    @extend_schema(request=LabelRequestSerializer, responses={200: serializers.DictField()})
    def post(self, request, name):
        body = request.data if isinstance(request.data, dict) else {}
        overwrite = body.get("overwrite", False)
        if not isinstance(overwrite, bool):
            raise labels.LabelError("overwrite must be true or false", field="overwrite")
        if not visible_nodes(request).filter(name=name).exists():
            raise Http404(f"No node named {name!r}")
        result = labels.label_node(name, labels.check_labels(body.get("labels")), overwrite=overwrite,
                                   backend=request.query_params.get("backend"))
        return Response({"node": name, "labels": result})

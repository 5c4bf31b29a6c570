"""Notification choices over the API: `/api/profile/notifications/` (every signed-in user, their own: GET, PUT
to set the fields given, DELETE to fall back to their projects' defaults) and
`/api/notifications/projects/{project}/` (staff or an admin role: a project's default for members who chose
nothing). Bodies are checked by `scheduling.run.notify_preferences`, which the page and the CLI call too; a
refusal is a 400 naming the field."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from pools.access.scoping import Rule
from pools.access.serializers import named
from scheduling.decisions.notifications import PENDING_MINUTES_RANGE, TRANSITIONS, WEBHOOK_MAX_CHARS
from scheduling.models import NotificationPreference
from scheduling.run import notify_preferences as prefs


class ChoiceBody(serializers.Serializer):
    """Only the fields given change."""

    transitions = serializers.ListField(child=serializers.ChoiceField(choices=TRANSITIONS), required=False)
    pending_minutes = serializers.IntegerField(min_value=PENDING_MINUTES_RANGE[0], max_value=PENDING_MINUTES_RANGE[1],
                                               required=False)
    webhook_url = serializers.CharField(max_length=WEBHOOK_MAX_CHARS, allow_blank=True, required=False,
                                        help_text="http(s) URL; Slack and Teams incoming webhooks read its `text`.")
    email = serializers.BooleanField(required=False)


class ChoiceSerializer(ChoiceBody):
    updated_at = serializers.DateTimeField(allow_null=True)
    updated_by = serializers.CharField()


class ProjectDefaultSerializer(serializers.Serializer):
    project = serializers.CharField()
    transitions = serializers.ListField(child=serializers.CharField())
    pending_minutes = serializers.IntegerField()
    webhook = serializers.BooleanField(help_text="Whether a webhook is set (its URL is the team's).")
    email = serializers.BooleanField()


class SentSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    workload = serializers.UUIDField()
    name = serializers.CharField()
    transition = serializers.CharField()
    attempt = serializers.IntegerField()
    channel = serializers.CharField()
    created_at = serializers.DateTimeField()
    sent_at = serializers.DateTimeField(allow_null=True)
    tries = serializers.IntegerField()
    gave_up = serializers.BooleanField()
    last_error = serializers.CharField()


class OwnSerializer(serializers.Serializer):
    own = ChoiceSerializer(allow_null=True, help_text="Your choice; null: your projects' defaults apply.")
    mail_address = serializers.CharField()
    transitions = serializers.ListField(child=serializers.CharField())
    project_defaults = ProjectDefaultSerializer(many=True)
    recent = SentSerializer(many=True)


class OwnNotificationsView(APIView):
    read_access = Rule.SIGNED_IN
    write_access = Rule.SIGNED_IN

    @extend_schema(responses=OwnSerializer)
    def get(self, request):
        return Response(prefs.own(request.user))

    @extend_schema(request=ChoiceBody, responses=OwnSerializer)
    def put(self, request):
        prefs.save_own(request.user, request.data, request.user)
        return Response(prefs.own(request.user))

    @extend_schema(responses=OwnSerializer)
    def delete(self, request):
        prefs.forget({"user": request.user}, request.user.get_username(), request.user)
        return Response(prefs.own(request.user))


@extend_schema(parameters=[named("project", "project")])
class ProjectNotificationsView(APIView):
    read_access = Rule.ADMIN
    write_access = Rule.ADMIN

    @extend_schema(responses=ChoiceSerializer)
    def get(self, request, project):
        found = prefs.project_by_name(project)
        return Response(prefs.describe(NotificationPreference.objects.filter(project=found).first()))

    @extend_schema(request=ChoiceBody, responses=ChoiceSerializer)
    def put(self, request, project):
        return Response(prefs.describe(prefs.save_project(prefs.project_by_name(project), request.data,
                                                          request.user)))

    @extend_schema(responses=ChoiceSerializer)
    def delete(self, request, project):
        found = prefs.project_by_name(project)
        prefs.forget({"project": found}, f"project/{found.name}", request.user)
        return Response(prefs.describe(None))

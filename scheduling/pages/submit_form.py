"""`/workloads/new/`: submitting from the browser (issue 26 point 3), and `/workloads/new/dry-run/`, the fragment
beside the form that shows what each candidate pool would do before anything is saved.

The form is a door, not a rule book: its boxes become a `POST /api/workloads/` body (`specs.form_fields`), a pasted
request body, OSMO workflow or gpuctl job file is read by the same readers as the API and the CLI
(`formats`), and everything then goes through `submission` exactly as those doors do (limits, the five steps per
pool, the stored-size check, the rate of attempts). A refusal comes back as the field it names, shown beside its
box. "Run again" (`?from=<workload id>`) fills the form from a workload's request, for those who may read it
(`bodies.readable_request`)."""

import json
import uuid
from dataclasses import dataclass, field

from django import forms
from django.conf import settings
from django.contrib import messages
from django.http import Http404, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_POST

from pools.access.scoping import Rule, access_required
from pools.engine import ConfigError, read_yaml
from pools.models import Project
from pools.models.visibility import access_for
from scheduling.listing import bodies
from scheduling.models import Kind, Priority, Source
from scheduling.pages.workloads import _visible_workload
from scheduling.specs import form_fields, formats
from scheduling.specs.podenv import MASK
from scheduling.submit import limits, submission

MODES = [("fields", "Fill in the fields"), ("request", "Paste a request body"),
         ("osmo", "Paste an OSMO workflow"), ("gpuctl", "Paste a gpuctl job file")]
PASTED = {"request": "request body (JSON or YAML)", "osmo": "OSMO workflow", "gpuctl": "gpuctl job file"}
MAX_POOL_CHOICES = 5  # ordered boxes; more candidates than this go through a pasted request body
TEXT = 1000  # a budget for one-line boxes; the pipeline and its limits judge the content


def _text(label: str, *, help_text: str = "", placeholder: str = "", max_length: int = TEXT,
          area: bool = False) -> forms.CharField:
    attrs = {"placeholder": placeholder} if placeholder else {}
    widget = forms.Textarea(attrs={**attrs, "rows": 4}) if area else forms.TextInput(attrs=attrs)
    return forms.CharField(label=label, required=False, max_length=max_length, help_text=help_text, widget=widget,
                           strip=not area)


class SubmitForm(forms.Form):
    mode = forms.ChoiceField(label="What to submit", choices=MODES, initial="fields", widget=forms.RadioSelect)
    project = forms.ChoiceField(label="Project")
    name = _text("Name", placeholder="train-resnet", max_length=200)
    kind = forms.ChoiceField(label="Kind", choices=Kind.choices, initial=Kind.TRAINING, required=False,
                             help_text="training runs to completion; a notebook is one pod with a link; an inference "
                                       "serves on a port (submitted again, it rolls to the new version); compute "
                                       "runs until stopped.")
    port = forms.IntegerField(label="Port", required=False, min_value=1, max_value=65535,
                              help_text="A notebook's or inference's HTTP port. Blank: 8888 or 8000.")
    image = _text("Image", placeholder="nvcr.io/nvidia/pytorch:24.05-py3")
    platform = _text("Platform", help_text="Blank: each pool's default platform.")
    command = _text("Command", placeholder="python train.py", max_length=65536,
                    help_text="Split into words as a shell would; quote a word with spaces.")
    args = _text("Arguments", placeholder="--epochs 10", max_length=65536)
    env = _text("Environment", placeholder="NAME=value, one a line", max_length=65536, area=True)
    replicas = forms.IntegerField(label="Replicas", required=False, initial=1,
                                  help_text="A gang: all replicas start together or none does.")
    gpu = _text("GPUs per replica", placeholder="1", max_length=40)
    cpu = _text("CPU per replica", placeholder="4 or 500m", max_length=40)
    memory = _text("Memory per replica", placeholder="16Gi", max_length=40)
    storage = _text("Storage per replica", placeholder="100Gi", max_length=40)
    priority = forms.ChoiceField(label="Priority", choices=Priority.choices, initial=Priority.NORMAL,
                                 help_text="high and normal are guaranteed within the deserved quota; low may borrow "
                                           "idle capacity and be preempted.")
    exec_timeout = _text("Exec timeout", placeholder="12h", max_length=40, help_text="Blank: the pool's default.")
    queue_timeout = _text("Queue timeout", placeholder="2d", max_length=40, help_text="Blank: the pool's default.")
    file = _text("Pasted file", area=True, max_length=1_048_576)

    def __init__(self, *args, request, project: str = "", **kwargs):
        super().__init__(*args, **kwargs)
        access = access_for(request)
        self.projects = {p.name: p for p in Project.objects.visible_to(request).select_related("department")
                         .order_by("name")}
        self.fields["project"].choices = [(name, name) for name in self.projects]
        chosen = self.data.get("project") if self.is_bound else (project or self.initial.get("project"))
        if chosen not in self.projects:
            preferred = submission.default_project(access)
            chosen = preferred if preferred in self.projects else next(iter(self.projects), "")
        if not self.is_bound:
            self.initial["project"] = chosen
        self.chosen_project = self.projects.get(chosen)
        self.defaults = self.default_pools(self.chosen_project)
        usable = list(access.visible_platforms)
        # The project's default pools first, in their order, then the other pools the user may use.
        ordered = [p for p in self.defaults if p in usable] + sorted(p for p in usable if p not in self.defaults)
        self.usable_defaults = [p for p in self.defaults if p in usable]
        self.unusable_defaults = len(self.defaults) - len(self.usable_defaults)  # counted, never named
        self.platforms = sorted({name for pool in usable for name in access.visible_platforms[pool]})
        self.fields["platform"].widget.attrs["list"] = "platform-choices"
        # Another project: its default pools first, chosen (the block is reloaded; the form then asks for a dry run).
        self.fields["project"].widget.attrs.update({
            "hx-get": reverse("workloads:new"), "hx-trigger": "change", "hx-target": "#pool-choices",
            "hx-swap": "outerHTML", "hx-sync": "this:replace"})
        self.pool_fields = []
        for index in range(max(1, min(len(ordered), MAX_POOL_CHOICES))):
            name = f"pool_{index + 1}"
            blank = "The project's default pools" if index == 0 else "(none)"
            self.fields[name] = forms.ChoiceField(
                label=f"Pool {index + 1}", required=False,
                choices=[("", blank), *((p, f"{p} (default)" if p in self.defaults else p) for p in ordered)])
            self.pool_fields.append(name)
        if not self.is_bound and "pools" not in self.initial:
            self.initial["pools"] = self.usable_defaults
        for name, pool in zip(self.pool_fields, self.initial.get("pools") or [], strict=False):
            self.initial[name] = pool

    @staticmethod
    def default_pools(project: Project | None) -> list[str]:
        if project is None:
            return []
        return list(project.default_node_pools or project.department.default_node_pools or ["default"])

    def pool_boxes(self):
        return [self[name] for name in self.pool_fields]

    def chosen_pools(self) -> list[str]:
        return [self.cleaned_data[name] for name in self.pool_fields if self.cleaned_data.get(name)]

    def add_refusal(self, exc: ConfigError) -> None:
        """The pipeline's words beside the box they are about (a pasted file's box for everything in it)."""
        mode = self.cleaned_data.get("mode", "fields") if hasattr(self, "cleaned_data") else "fields"
        name = form_fields.form_field(exc.field)
        if mode != "fields" and name not in ("project", "pools"):
            name = "file"
        if name == "pools":
            name = self.pool_fields[0]
        self.add_error(name if name in self.fields else None, exc.message)


@dataclass
class Outcome:
    """What one attempt came to: per workload (one, or one per task group of a workflow), its verdicts."""

    groups: list[submission.Submitted] = field(default_factory=list)
    workflow: str = ""
    warnings: list[str] = field(default_factory=list)
    refused: submission.SubmissionRefused | None = None
    problem: str = ""  # a refusal before the pipeline (size, rate), or a form error, in words
    status: int = 200
    named: frozenset[str] = frozenset()  # the pools the user named (their names are theirs to read)


def _pasted(form: SubmitForm) -> str:
    text = form.cleaned_data.get("file") or ""
    if not text.strip():
        raise ConfigError(f"file: paste the {PASTED[form.cleaned_data['mode']]} here", field="file")
    return text


def _requests(form: SubmitForm):
    """The mode's request (a body or a WorkloadRequest), or an OSMO workflow."""
    data, mode = form.cleaned_data, form.cleaned_data["mode"]
    pools = form.chosen_pools()
    if mode == "fields":
        return form_fields.body({**data, "pools": pools})
    if mode == "request":
        document = read_yaml(_pasted(form), "file", what="is neither JSON nor YAML")
        if isinstance(document, dict):  # the form's project and pools where the body names none
            document = {"project": data["project"], **({"pools": pools} if pools else {}), **document}
        return document
    if mode == "gpuctl":
        request = formats.gpuctl_request(_pasted(form))
        return request.model_copy(update={"project": request.project or data["project"],
                                          "pools": request.pools or pools or None})
    first = (pools or form.defaults or ["default"])[0]
    workflow = formats.workflow_requests(_pasted(form), pool=first, priority=data["priority"],
                                         project=data["project"], ceilings=limits.workflow_ceilings())
    groups = [formats.GroupRequest(g.group, g.request.model_copy(update={"pools": pools or None}))
              for g in workflow.groups]
    return formats.Workflow(workflow.name, groups, workflow.warnings)


def attempt(request, form: SubmitForm, *, dry_run: bool) -> Outcome:
    """Check the attempt's size and rate as the API does, then run the pipeline (and save, unless `dry_run`)."""
    most = getattr(settings, limits.BODY_SETTING, 262144)
    declared = str(request.META.get("CONTENT_LENGTH") or "0")
    length = int(declared) if declared.isascii() and declared.isdigit() else 0
    if length > most:
        return Outcome(problem=f"request body: {length:,} bytes is over the limit of {most:,} bytes for a submission "
                               f"({limits.BODY_SETTING})", status=413)
    try:
        limits.count_submission(request.user)
    except limits.RateLimited as exc:
        return Outcome(problem=exc.message, status=429)
    if not form.is_valid():
        return Outcome(problem="Some fields need correcting (each is marked beside its box):", status=400)
    access = access_for(request)
    named = frozenset(form.chosen_pools())
    try:
        wanted = _requests(form)
        named |= _named_pools(wanted)
        if isinstance(wanted, formats.Workflow):
            evaluated = submission.evaluate_workflow(access, wanted, Source.WEB)
            outcome = Outcome(evaluated, wanted.name, list(wanted.warnings), named=named)
            if not dry_run:
                outcome.workflow = submission.save_workflow(access, wanted, evaluated, Source.WEB)
            return outcome
        return Outcome([submission.submit(request, wanted, source=Source.WEB, dry_run=dry_run)], named=named)
    except submission.SubmissionRefused as exc:
        # Its message names every candidate; the panel shows them one by one, as this user may read them.
        return Outcome(refused=exc, problem="No candidate pool can take this workload: see each pool's answer.",
                       status=403 if exc.forbidden else 400, named=named)
    except ConfigError as exc:
        form.add_refusal(exc)
        return Outcome(problem=exc.message, status=400)


def _named_pools(wanted) -> frozenset[str]:
    if isinstance(wanted, formats.Workflow):
        return frozenset(p for g in wanted.groups for p in g.request.pools or ())
    pools = wanted.get("pools") if isinstance(wanted, dict) else getattr(wanted, "pools", None)
    return frozenset(str(p) for p in pools or () if isinstance(p, str))


def _candidates(outcome: Outcome, visible: frozenset[str] | None) -> list[dict]:
    """Per workload, per candidate pool: accepted (with the pod template, as text) or refused (with the words).
    A candidate that came from the project's defaults and that the user may not see is told as such, unnamed."""
    def shown(verdict) -> dict:
        if visible is not None and verdict.pool not in visible and verdict.pool not in outcome.named:
            return {"pool": bodies.HIDDEN_MESSAGE, "accepted": False, "step": "access", "code": "ACCESS",
                    "message": "One of the project's default pools, which you may not use.", "template": ""}
        template = json.dumps(verdict.pod_template, indent=2) if verdict.accepted and verdict.pod_template else ""
        return {**verdict.as_dict(), "template": template}
    if outcome.refused is not None:
        return [{"name": "", "verdicts": [shown(v) for v in outcome.refused.verdicts]}]
    return [{"name": item.request.group or item.request.name, "verdicts": [shown(v) for v in item.verdicts],
             "admission": item.preview} for item in outcome.groups]


def _context(request, form: SubmitForm, outcome: Outcome | None = None, **extra) -> dict:
    visible = access_for(request).visible_pool_names
    return {"form": form, "outcome": outcome, "candidates": _candidates(outcome, visible) if outcome else [],
            "modes": MODES, "nav": "workloads", **extra}


def _rerun(request, pk: str) -> tuple[dict, str]:
    """The form's initial values from a workload's request, and a notice (empty when there is nothing to say)."""
    try:
        workload = _visible_workload(request, uuid.UUID(pk))
    except ValueError:
        raise Http404("No such workload, or it is not yours to see.") from None
    shown = bodies.readable_request(workload, access_for(request))
    if shown is None:
        return {}, (f"Only the submitter of {workload.name}, the members of its project (other than default) and "
                    "admins may read its request: the form is empty.")
    notice = f"Filled from workload {workload.name}: check it, then submit it as a new workload."
    if any(value == MASK for value in (shown.get("env") or {}).values()):
        notice += f" Values shown as {MASK} are hidden from you: replace them."
    if form_fields.covered(shown):
        return form_fields.fields_of(shown), notice
    document = form_fields.rerun_document(shown)
    return {"mode": "request", "project": shown.get("project") or "", "pools": shown.get("pools") or [],
            "file": json.dumps(document, indent=2)}, notice + " Its request has fields the boxes do not show, so it " \
                                                           "is given as a request body."


@access_required(write=Rule.SIGNED_IN)
def new_workload(request):
    if request.method == "POST":
        form = SubmitForm(request.POST, request=request)
        dry_run = request.POST.get("action") == "dry-run"  # the no-script way to the dry run: the same page
        outcome = attempt(request, form, dry_run=dry_run)
        if outcome.status == 200 and not dry_run:
            return _submitted(request, outcome)
        return render(request, "workloads/new.html", _context(request, form, outcome), status=outcome.status)
    initial, notice = ({}, "")
    if request.GET.get("from"):
        initial, notice = _rerun(request, request.GET["from"])
    form = SubmitForm(initial=initial, request=request, project=request.GET.get("project", ""))
    if request.htmx and request.htmx.target == "pool-choices":
        # The project changed: its default pools first, chosen; the form then asks for a new dry run.
        response = render(request, "workloads/_pool_choices.html", {"form": form})
        response["HX-Trigger"] = "pools-changed"
        return response
    # A form filled from a workload is checked as soon as it shows.
    return render(request, "workloads/new.html", _context(request, form, notice=notice, check_on_load=bool(initial)))


def _submitted(request, outcome: Outcome):
    if outcome.workflow:
        names = ", ".join(item.request.name for item in outcome.groups)
        messages.success(request, f"Workflow {outcome.workflow} submitted: {names}.")
        return HttpResponseRedirect(f"{reverse('workloads:list')}?{urlencode({'workflow': outcome.workflow})}")
    workload = outcome.groups[0].workload
    messages.success(request, f"Workload {workload.name} submitted; candidate pools: {', '.join(workload.pools)}.")
    return HttpResponseRedirect(reverse("workloads:detail", args=[workload.pk]))


@require_POST
@access_required(write=Rule.SIGNED_IN)
def dry_run(request):
    """The fragment beside the form: what each candidate pool would do with what the form holds now. Nothing is
    saved; the attempt counts towards the rate of submissions, as the API's dry runs do."""
    form = SubmitForm(request.POST, request=request)
    outcome = attempt(request, form, dry_run=True)
    return render(request, "workloads/_dry_run.html", _context(request, form, outcome), status=outcome.status)

from django.db import migrations

KINDS = ["POOL", "POD_TEMPLATE", "RESOURCE_VALIDATION"]


def create_counters(apps, schema_editor):
    counter = apps.get_model("pools", "RevisionCounter")
    for kind in KINDS:
        counter.objects.get_or_create(kind=kind)


class Migration(migrations.Migration):
    dependencies = [("pools", "0001_initial")]
    operations = [migrations.RunPython(create_counters, migrations.RunPython.noop)]

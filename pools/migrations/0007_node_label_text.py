from django.db import migrations, models

from pools.inventory.nodes import label_text


def fill_label_text(apps, schema_editor):
    Node = apps.get_model("pools", "Node")
    batch = []
    for node in Node.objects.only("pk", "labels").iterator(chunk_size=2000):
        node.label_text = label_text(node.labels)
        batch.append(node)
        if len(batch) == 2000:
            Node.objects.bulk_update(batch, ["label_text"])
            batch = []
    Node.objects.bulk_update(batch, ["label_text"])


class Migration(migrations.Migration):

    dependencies = [
        ("pools", "0006_drop_backend_heartbeat"),
    ]

    operations = [
        migrations.AddField(
            model_name="node",
            name="label_text",
            field=models.TextField(blank=True, default="", editable=False),
        ),
        migrations.RunPython(fill_label_text, migrations.RunPython.noop),
    ]

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("pools", "0012_engines"),
    ]

    operations = [
        migrations.AddField(
            model_name="backend",
            name="listed_at",
            field=models.DateTimeField(blank=True, editable=False, null=True),
        ),
    ]

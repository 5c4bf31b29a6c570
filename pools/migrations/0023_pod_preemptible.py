from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('pools', '0022_project_limits'),
    ]

    operations = [
        migrations.AddField(
            model_name='pod',
            name='preemptible',
            field=models.BooleanField(default=False),
        ),
    ]

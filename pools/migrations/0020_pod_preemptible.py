from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('pools', '0019_job_create_failures'),
    ]

    operations = [
        migrations.AddField(
            model_name='pod',
            name='preemptible',
            field=models.BooleanField(default=False),
        ),
    ]

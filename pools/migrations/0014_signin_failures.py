from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("pools", "0013_backend_listed_at"),
    ]

    operations = [
        migrations.CreateModel(
            name="SignInFailure",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("username", models.CharField(max_length=150)),
                ("address", models.GenericIPAddressField(blank=True, null=True)),
                ("at", models.DateTimeField()),
            ],
            options={
                "indexes": [
                    models.Index(fields=["username", "at"], name="signin_failure_user_at"),
                    models.Index(fields=["address", "at"], name="signin_failure_address_at"),
                    models.Index(fields=["at"], name="signin_failure_at"),
                ],
            },
        ),
    ]

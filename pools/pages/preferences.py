"""The column chooser: each user's columns per table, kept in the database so they follow the user
from browser to browser. A `cols=` query parameter (a shared link) wins over the saved choice."""

from pools.models import TablePreference

from .tables import Column, Table


def saved_keys(user, table: Table) -> list[str] | None:
    if not user.is_authenticated:
        return None
    return TablePreference.objects.filter(user=user, table=table.name).values_list("columns", flat=True).first()


def chosen_columns(request, table: Table) -> list[Column]:
    override = request.GET.get("cols")
    if override:
        return table.choose(key.strip() for key in override.split(","))
    return table.choose(saved_keys(request.user, table))


def save(user, table: Table, keys: list[str]) -> list[Column]:
    columns = table.choose(keys)
    TablePreference.objects.update_or_create(user=user, table=table.name,
                                             defaults={"columns": [column.key for column in columns]})
    return columns


def reset(user, table: Table) -> None:
    TablePreference.objects.filter(user=user, table=table.name).delete()


def moved(order: list[str], key: str, direction: str) -> list[str]:
    """`order` with `key` one place up or down (unchanged at either end)."""
    order = list(order)
    index = order.index(key)
    other = index - 1 if direction == "up" else index + 1
    if 0 <= other < len(order):
        order[index], order[other] = order[other], order[index]
    return order


def chooser(table: Table, shown: list[Column]) -> list[tuple[Column, bool]]:
    """Every column with whether it is shown: the shown ones first, in their order, so that saving the
    form (whose checkboxes submit in document order) keeps that order."""
    shown_keys = {column.key for column in shown}
    return [(column, True) for column in shown] + [(c, False) for c in table.columns if c.key not in shown_keys]

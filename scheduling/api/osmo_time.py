"""Times on OSMO's paths as OSMO's CLI parses them: UTC, `%Y-%m-%dT%H:%M:%S.%f`, no zone (it reads them with
`strptime` after replacing the `T`, and fails on `Z` or `+00:00`). Our own paths keep ISO 8601 with the zone."""

import datetime as dt


def osmo_time(moment: dt.datetime | str | None) -> str | None:
    if moment is None:
        return None
    if isinstance(moment, str):
        moment = dt.datetime.fromisoformat(moment)
    if moment.tzinfo is not None:
        moment = moment.astimezone(dt.UTC).replace(tzinfo=None)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%f")

"""Usage accounting (issue 27): intervals of what pods held (`observe`), hourly rollups (`rollup`, over the
pure arithmetic of `buckets`), reports (`reports`) for the `/usage/` page, `GET /api/usage/` and
`manage.py usage report`."""

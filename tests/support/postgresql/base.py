"""PostgreSQL as the suite's in-process tests use it (osmo_site/settings_test.py names this backend): Django's own,
except that a transactional test's clean-up (`flush`) empties the tables with DELETE instead of TRUNCATE.

TRUNCATE gives each of the ~40 tables a new file that the server syncs to disk at commit: 1.4-2.0 s per flush
measured on the 2-core machine under load, paid after every `transaction=True` test (every `live_server` test is
one, and there are about 200); DELETE of the few rows such a test leaves took 0.04 s there. Both leave every
table empty, and Django's foreign keys are DEFERRABLE, so deleting in any order within the flush's one transaction
is valid once all are deleted. A flush that must also restart the sequences keeps TRUNCATE ... RESTART IDENTITY."""

from django.db.backends.postgresql import base


class DatabaseOperations(base.DatabaseOperations):
    def sql_flush(self, style, tables, *, reset_sequences=False, allow_cascade=False):
        if not tables or reset_sequences:
            return super().sql_flush(style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade)
        return [f"{style.SQL_KEYWORD('SET CONSTRAINTS ALL DEFERRED')};", *(
            f"{style.SQL_KEYWORD('DELETE FROM')} {style.SQL_FIELD(self.quote_name(table))};" for table in tables)]


class DatabaseWrapper(base.DatabaseWrapper):
    ops_class = DatabaseOperations

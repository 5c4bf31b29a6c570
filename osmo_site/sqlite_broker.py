"""The demo's Celery broker: kombu's SQLAlchemy transport on a SQLite file of its own (`.data/broker.sqlite3`), which
needs no service and cannot corrupt a message between concurrent readers.

Kombu's filesystem transport, the demo's broker before, lets two workers read one message file while it is being
written or moved: `worker-admission` died of `JSONDecodeError` reading half a message (issue 44). Here each take is
one SQLite transaction begun IMMEDIATE (one writer at a time: no two workers take the same row, none reads a row
half-written), in WAL mode (readers never wait for the writer), with a busy timeout of BUSY_TIMEOUT_S (a process
waits for the lock rather than fail). Its tables are made by the first connection: `manage.py demo` makes one before
it starts the processes that share the file, so that they do not race to create them. The file is the broker's
alone, not the demo's database: the broker's polls (each worker about once a second) never hold the lock the site's
own writes wait for.

One change to kombu's channel: a message taken is deleted in the transaction that takes it, where kombu only marks
it invisible and keeps it for ever (the table, and each poll's scan of it, grew all day). Nothing is lost by that:
an invisible row was never delivered again either; a message a worker took and had not acknowledged is put back by
the worker at a warm shutdown (kombu's virtual QoS), or, if the worker was killed, redone by the periodic task that
sent it (syncs, cycles) or the lifecycle sweep (scheduling/run/outbox.py)."""

from kombu.transport import sqlalchemy
from kombu.transport.virtual import Empty
from kombu.utils.encoding import bytes_to_str
from kombu.utils.json import loads
from sqlalchemy import event, text

BUSY_TIMEOUT_S = 30  # SQLite waits this long for another process's transaction (then: a connection error)


def _pragmas(dbapi_connection, _record) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_S * 1000}")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.close()


class Channel(sqlalchemy.Channel):
    def _engine_from_config(self):
        engine = super()._engine_from_config()
        if engine.dialect.name == "sqlite":
            event.listen(engine, "connect", _pragmas)
        return engine

    def _get(self, queue):
        row_class = self.message_cls
        found = self._get_or_create(queue)
        session = self.session
        try:
            if session.bind.dialect.name == "sqlite":
                session.execute(text("BEGIN IMMEDIATE TRANSACTION"))
            row = (session.query(row_class).with_for_update()
                   .filter(row_class.queue_id == found.id, row_class.visible != False)  # noqa: E712 (SQL)
                   .order_by(row_class.sent_at, row_class.id).first())
            if row is None:
                session.commit()
                raise Empty()
            payload = row.payload
            session.delete(row)
            session.commit()
        except Empty:
            raise
        except Exception:
            session.rollback()
            raise
        return loads(bytes_to_str(payload))


class Transport(sqlalchemy.Transport):
    Channel = Channel

"""A plain Arrow Flight client (issue 29): only pyarrow.flight and the
standard library, following the root README's "Plain Arrow Flight clients"
to the letter (the token from the tokens file, the command as JSON, one
connection per endpoint location), reads a pipeline from the session's real
readers. What it reads is checked against the Python client's read of the
same range (the only use of sig_client here, as the reference).
"""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.flight as flight
import pytest

# 2026-01-01T00:30:00Z to 00:31:00Z: the minute, 60 of a block's
# 2,000 rows (one event a second from 00:00:00Z).
START_US, END_US = 1767227400000000, 1767227460000000


def readme_read(reader_addr: str, tokens_file: str, client: str, pipeline: str, command_extra: dict):
    """The README's example, with the stack's address, tokens file and
    pipeline in place of the README's."""
    tokens = json.load(open(tokens_file))["tokens"]
    token = next(t["token"] for t in tokens if t["name"] == "trainer-" + client)
    options = flight.FlightCallOptions(headers=[(b"authorization", b"Bearer " + token.encode())])
    reader = flight.connect("grpc://" + reader_addr)

    command = {"client": client, "pipeline": pipeline, **command_extra}
    descriptor = flight.FlightDescriptor.for_command(json.dumps(command))

    schema = reader.get_schema(descriptor, options).schema
    info = reader.get_flight_info(descriptor, options)
    tables = []
    for endpoint in info.endpoints:
        conn = flight.connect(endpoint.locations[0]) if endpoint.locations else reader
        tables.append(conn.do_get(endpoint.ticket, options).read_all())
    table = pa.concat_tables(tables) if tables else schema.empty_table()
    return schema, info, table, reader, options


def test_plain_flight_reads_a_pipeline(stack, ctr_pipeline):
    client, pipeline = ctr_pipeline
    rng = {"range": {"start_micros": START_US, "end_micros": END_US}}
    schema, info, table, reader, options = readme_read(stack.reader_addrs[0], stack.tokens_file, client, pipeline, rng)

    # The reference: the Python client's read of the same range.
    c = stack.client("trainer-" + client)
    try:
        batches = list(c.read(client, pipeline, start=START_US, end=END_US))
    finally:
        c.close()
    want = pa.Table.from_batches(batches)
    assert table.num_rows == 60
    assert table.equals(want)
    assert table.schema.equals(schema), "GetSchema's schema is not the batches'"
    assert info.schema.equals(schema), "GetSchema and GetFlightInfo disagree"
    assert schema.names[:3] == ["event_id", "click", "conversion"]
    # The range cuts its block: how many rows it holds is known only once
    # read (-1, Flight's unknown).
    assert len(info.endpoints) == 1 and info.total_records == -1

    # The whole submitted range: every block whole, its rows counted.
    _, info, whole, _, _ = readme_read(stack.reader_addrs[1], stack.tokens_file, client, pipeline,
                                       {"range": {"start_micros": "1767225600000000", "end_micros": "1767232800000000"},
                                        "label_columns": ["event_time"], "batch_rows": 500, "mode": "FLIGHT_MODE_LOCAL"})
    assert whole.num_rows == info.total_records == 6000
    assert whole.schema.names[:2] == ["event_id", "event_time"]
    assert whole.column("event_id").to_pylist() == list(range(1, 6001))

    # What the README says of the other methods.
    assert list(reader.list_actions(options)) == []
    with pytest.raises(pa.ArrowException) as e:
        list(reader.list_flights(options=options))
    assert "GetFlightInfo" in str(e.value)


def test_plain_flight_bad_command(stack, ctr_pipeline):
    """A JSON command with a field FlightCommand does not have is refused,
    naming descriptor.cmd; a range sigd refuses comes back naming it (both
    InvalidArgument, which pyarrow raises as ArrowInvalid)."""
    client, pipeline = ctr_pipeline
    with pytest.raises(pa.ArrowInvalid) as e:
        readme_read(stack.reader_addrs[0], stack.tokens_file, client, pipeline, {"start": START_US})
    assert "descriptor.cmd" in str(e.value)
    with pytest.raises(pa.ArrowInvalid) as e:
        readme_read(stack.reader_addrs[0], stack.tokens_file, client, pipeline,
                    {"range": {"start_micros": END_US, "end_micros": START_US}})
    assert "range" in str(e.value)

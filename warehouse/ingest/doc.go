// Package ingest turns the raw event stream into warehouse blocks (paper III,
// IV.A; brief, "Warehouse"): it consumes the Kafka topic raw.<source> as a
// consumer group, decodes and validates each record (warehouse/record),
// collects rows into per-partition, per-event-time-window buffers, seals a
// buffer into a block (warehouse/block) when its rows would encode to
// BlockBytes ("Block size" below), when the stream's event time has moved
// past the window, or SealAfter after the buffer's first row, writes the
// block object (or new versions of stored blocks, "Changes" below), records
// it in the catalog (warehouse/catalog), and only then commits the Kafka
// offsets; once a window is closed and quiet, it compacts the window's small
// blocks ("Compaction" below). It runs inside sigd and alone as `sigctl
// ingest`. Run first creates the source and
// dead-letter topics if they are missing (Topics, internal/topics) and fails
// if it cannot.
//
// # Records
//
// The record format is documented in warehouse/record: JSON objects keyed by
// column name (content-type application/json, or no header), or the compact
// row encoding (application/vnd.sig.row.v1) that the generator uses. The
// header's name is matched in any case and its value parsed as a media type
// (record.ParseContentType: "application/json; charset=utf-8" is JSON). A record
// that cannot be decoded, misses a column, has a wrong type, belongs to
// another schema or is larger than MaxRecordBytes goes to the dead-letter
// topic raw.<source>.dlq with its key, value (cut to MaxDeadLetterBytes) and
// headers, plus headers sig-dlq-reason (what is wrong, for people),
// sig-dlq-reason-code (one of DeadLetterReasons: record's oversized,
// content_type, syntax, schema and kind, and event_time_range,
// event_time_ahead and unknown_event below), sig-dlq-topic,
// sig-dlq-partition and sig-dlq-offset. Ingestion never stops for a
// malformed record.
//
// So does a record whose event_time is outside the event times SIG stores
// (transform.CheckEventTime: 1970-01-01T00:00:00Z to the end of year 9999;
// a window's start is written with a four-digit year in block ids, which
// must sort as event time does),
// or more than MaxEventTimeAhead (default 1h) ahead of the ingester's clock
// (Config.Clock): no producer's clock is that far off, and keeping such a
// record would make a block of a window that has not begun.
//
// Records have kinds (header sig-kind, warehouse/record): events, and
// updates and deletes of stored events ("Changes" below).
//
// # Block size
//
// A block is sealed when its rows would encode to about BlockBytes
// (--block-bytes, default DefaultBlockBytes), estimated from the buffer's
// Arrow builders every 64 rows (values and offsets, before segment
// compression; TestSealBySize holds blocks within a fifth of the target),
// and, only if RowsPerBlock is set, at that many rows. Bytes, not rows
// (issue 28): what a block costs is its requests and bytes, per object and
// per component (a worker's task, a reader's fetches, the guard's sample,
// a unit's plan), and rows of one source range from a few hundred bytes to
// kilobytes. The default comes from a measured sweep, bench/block-bytes.sh
// (docs/ARCHITECTURE.md, "Block size by bytes"). Late rows are appended to
// a window's newest block only while it stays within the same bound.
//
// # Windows and late events
//
// Blocks belong to an event-time window (Window, hourly by default; window
// start = event_time rounded down). Each partition keeps a watermark, the
// largest event time it has seen but never later than the ingester's clock
// (restored from the catalog after a restart, with the same bound). A window
// is closed once the watermark passes its end plus Lateness; its open buffer
// is sealed then. Bounding the watermark by the clock means that one record
// stamped ahead of time cannot close windows that are still filling and
// flag every block after it late: only time passing closes a window of a
// live stream, while a replayed stream (event times in the past) closes its
// windows as its event time moves on. A record for a closed window
// starts a new buffer for that window (late), which stays open for one
// window of stream time.
//
// # Changes: late events, updates, deletes
//
// A sealed block never changes in place. A buffer's records are applied in
// offset order: events are its new rows; an update overwrites the named
// columns of the event with its event_id in the partition and window (the
// producer keys the update as it keyed the event), stored in a catalogued
// block or among the buffer's own rows; a delete removes the event. An
// update or delete naming no event the window holds (never ingested,
// deleted already, not arrived yet) goes to the dead-letter topic with
// reason unknown_event. The window's index (its blocks of this partition and
// where each event id is) is read from the catalog and the event_id columns
// on the buffer's first update or delete.
//
// Sealing a buffer writes:
//
//   - its new rows (without those it deleted, with its updates) as a new
//     block (version 1), unless the window was closed when the buffer began
//     (late events) and the window's newest block of this partition has room
//     for them (RowsPerBlock): then they are appended to that block. A late
//     buffer of a window with no block yet makes a block flagged Late;
//   - a new version of every stored block that receives rows or whose rows
//     its changes touch, written whole under block.RawKey (version
//     1 objects keep their keys and bytes). The version's metadata
//     (block.Meta) records, per column, the version at which its values
//     last changed: an update bumps the columns it overwrote (a label
//     update leaves every feature column at its version), appended or
//     deleted rows bump every column (derived data must stay row-aligned);
//     and in Changes, oldest first, each change that made a version: the
//     buffer's topic, partition, offsets and its counts of late, updated
//     and deleted rows.
//
// All of it is catalogued in one batch (catalog.Commit) with the coverage
// of the buffer's offsets, so a catalog snapshot sees every version a
// buffer made or none; then offsets are committed. Dead letters among the
// buffer's records are acknowledged before that batch (once covered, they
// are never consumed again).
//
// Superseded versions stay catalogued and stored while a catalog pin (a
// training epoch's snapshot) or the grace period (GCGrace, default 10m) may
// still read them; every GCInterval (default 1m) ingestion collects the rest
// (catalog.GCUpTo, then their objects: catalog first, so a crash leaves an
// orphan object, never a catalogued version without one). The newest
// version of a block is never collected.
//
// # Compaction
//
// A stream sealed often (SealAfter of a second, as sigd dev runs) makes
// blocks far below BlockBytes, each costing readers and workers an object
// (bench/caughtup.txt). The compactor (compact.go) follows the catalog's
// change feed (catalog.ChangedSince) from a position it stores in the
// catalog ("ingest.compact.<source>", kept before the oldest window it has
// not settled, so a restart sees every such window again), and once a
// partition's window is closed (the watermark passed its end and
// Lateness) and quiet (no new block or version for CompactQuiet, default
// DefaultCompactQuiet; every later change would rewrite the compacted
// block whole), it compacts runs of its small blocks into blocks of
// CompactBytes (default BlockBytes): warehouse/compact plans the runs,
// names the compacted block (its id from the window and the Kafka range
// it covers) and its lineage (block.Meta.Parts). For each run it
//
//  1. reads the parts' objects (their newest versions) and writes the
//     compacted block's object whole (block.Write);
//  2. under the ingester's lock, and only while no buffer of that
//     partition and window is open (a buffer that read the window's blocks
//     and later made a version of a part would be refused by the catalog
//     and stop ingestion), commits it in one catalog batch with a
//     tombstone version of every part and the parts' Kafka coverage moved
//     to it (catalog.Compact). The catalog refuses the batch if a part
//     changed since it was read (ErrConflict); a refused batch's object is
//     deleted.
//
// A crash before step 2 leaves an orphan object: the parts are still the
// blocks, and the window is compacted again after the restart, into the
// same object when the run is the same (catalog.Rebuild leaves out a
// compacted object whose parts have newer objects, or that a later
// generation's compaction of the same parts replaced). After it, the
// compacted block is what every later snapshot reads; snapshots pinned
// before it (training epochs) keep reading the parts, whose objects GC
// deletes once no pin sees them (GCInterval, GCGrace). No record is in
// two blocks at any snapshot, and coverage is unchanged, so exactly once
// below holds as before. TestCompactionKilledMidWindow SIGKILLs a real
// `sigctl ingest` between the two steps (SIG_TEST_COMPACT_DELAY) and checks
// every catalogued block, now and at a pinned snapshot, against its bytes.
// Ingestion writes no memo data: sigd concatenates the compacted block's
// memo columns from the parts' packs for the row-wise components whose
// parts are all memoized (package versions' Concatenator,
// warehouse/compact's ConcatMember), and read solutions create the rest
// pending for workers, like any new block's; training jobs keep exactly
// once across it from its lineage (trainer/control, "Compaction").
//
// # Exactly once
//
// The order of effects for every block is: write the object, add it to the
// catalog (a synchronous Pebble write), then commit offsets. The offset
// committed for a partition is the first offset of its oldest open buffer (or
// the next offset, if none is open), after any dead-letter records before it
// are acknowledged. Hence:
//
//  1. Nothing is lost. A committed offset never passes a record that is not in
//     a catalogued block or acknowledged on the dead-letter topic.
//  2. Nothing is duplicated, no change applied twice. After a crash the
//     group resumes from the committed offset, so records may be consumed
//     again: some of them are in blocks or versions catalogued before the
//     crash (of other windows, sealed after the oldest open buffer began). A
//     sealed buffer of partition p and window w applied every record of w
//     between its first and last offset (buffers collect contiguously), and
//     the catalog records that span as covered (a new block's Kafka range, a
//     version's last change), so record (offset o, window w) is already
//     stored exactly when a catalogued span of (p, w) covers o. On
//     (re)assignment the ingester loads that coverage from the catalog
//     (catalog.Covered) and skips those records. The catalog also refuses
//     any span that overlaps another of the same partition and window
//     (ErrOverlap), and a version that does not follow the catalogued one
//     (ErrConflict), so a bug here stops ingestion instead of
//     double-counting.
//  3. Objects without catalog entries are harmless. A crash between writing an
//     object and cataloguing it leaves an orphan object. Its records are
//     re-consumed and re-cut; with the same boundaries (row-count and
//     watermark seals are deterministic given the stream) the block has the
//     same id and the object is overwritten; with different boundaries (a
//     SealAfter seal depends on wall time) the orphan stays in the bucket but
//     not in the catalog. Every block carries the generation of the
//     ingestion process that wrote it (catalog.NextGeneration at start), and
//     catalog.Rebuild resolves overlaps in favour of the later generation, so
//     a catalog rebuilt from the bucket alone also counts every record once.
//     A version object orphaned so is overwritten when the same records make
//     the same version again (its key is the block's id and version), or
//     left out by Rebuild when a later generation's span overlaps its own.
//
// # Committed offsets the log does not have
//
// When partitions are assigned, the ingester compares each committed offset
// with the log's start and end before it consumes:
//
//   - Past the end: the broker no longer has the log the offset was committed
//     in. kfake forgot a topic it had auto-created when it was killed, and a
//     producer created the topic again, empty (SIG now creates its topics at
//     start: internal/topics); a real broker does this after an unclean
//     leader election lost acknowledged records.
//   - Before the start: retention (or DeleteRecords) removed records before
//     they were ingested; they are lost.
//
// Either is logged at Error level with the topic, partition, committed offset
// and the log's start and end, counted (Stats.OffsetResets and OffsetsBehind;
// sigd exports them), and consumption resumes at the log's start. The start,
// not the end, because every record the log holds is then consumed: in a
// recreated topic all of them are new, and resuming at the end would drop
// those produced before the ingester joined; in a log the broker truncated,
// the records before its end are the ones already stored, and the catalog's
// coverage skips them (point 2 above). Retention deletes from a log's start
// and never moves its end back, so with a real broker it makes a committed
// offset fall behind the start, never past the end; resuming at the start
// then loses only what the broker deleted.
//
// What SIG cannot tell apart: a recreated topic reuses offsets the catalog
// already covers. A record of the new log whose offset and window a
// catalogued block covers is skipped as stored, and a block spanning covered
// offsets is refused (ErrOverlap: ingestion stops, naming both blocks) rather
// than counted twice. Recreating a topic under a live catalog is not
// supported; the Error log says when it has happened.
//
// # Metrics
//
// RegisterMetrics exports Stats per source (sigd does, on /metrics):
// sig_ingest_records_total (consumed), sig_ingest_rows_total (events in
// catalogued blocks and versions), sig_ingest_blocks_total,
// sig_ingest_late_blocks_total, sig_ingest_late_rows_total,
// sig_ingest_block_versions_total by kind (late, update, delete: what made
// each new version), sig_ingest_changed_rows_total by kind (update, delete),
// sig_ingest_versions_collected_total,
// sig_ingest_dead_letters_total by reason code (the fixed set, zeros
// included), sig_ingest_skipped_records_total,
// sig_ingest_offset_commits_total and sig_ingest_offset_resets_total by
// reason (past_end, before_start), sig_ingest_compactions_total and
// sig_ingest_compacted_blocks_total.
//
// Readers only ever see catalogued blocks. One ingestion process per source
// and catalog: the consumer group provides offsets and restarts, not
// parallelism across catalogs.
//
// An object-store outage stalls sealing: block writes retry (objstore's
// policy, then again here, until the context ends), nothing is committed in
// the meantime, and consumption resumes when the store is back.
package ingest

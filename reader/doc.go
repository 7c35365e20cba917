// Package reader owns the stateless input readers (paper IV.B, "Input
// Reading"): gRPC servers that serve a work unit, one block of a pipeline's
// read solution, as a stream of Arrow record batches, and the client TPU
// host workers use to read units from any of them.
//
// It does not decide which units exist or who reads them (the trainer's
// controller and host workers), what is memoized (matching, workers), nor
// how blocks are laid out (warehouse/block) or ops computed (transform).
//
// # Work units
//
// A unit (proto/reader/v1 WorkUnit) is self-contained: the raw block and its
// source's schema, the label columns, and per model input its component key
// and type, the memo object and its state from the read solution, the
// component's canonical DSL, and a mode. A reader keeps nothing between
// calls, so any reader serves any unit (paper IV.B: "Input readers are
// designed to be stateless"), and hosts scale readers horizontally by the
// number of units they keep in flight. A unit's component keys are parsed
// once, when the unit is checked (canon.ParseKey, InvalidArgument naming
// inputs[i].component_key), and are canon.Keys from then on, to the reports
// to sigd and the errors' details, which write them in hex again.
//
// Every batch holds event_id (int64), the labels (default click and
// conversion), then one column per model input in the unit's order, rows in
// block order. Batch k of a unit is its rows [k*B, (k+1)*B) (B =
// batch_rows, default 4096), cut to [start_row, rows); each response's
// arrow_ipc is a complete Arrow IPC stream (schema, one record batch,
// end-of-stream), so every response decodes on its own. A final response
// carries a summary: rows sent, the unit's rows, and the CRC-32C of the
// call's arrow_ipc bytes. A unit's rows are its block's, or with an event
// range only some of them (below).
//
// # Event ranges
//
// A read solution names the blocks overlapping its half-open event-time
// range, and a block's rows span its window, so the blocks at a range's
// edges hold rows outside it (issue 29: a minute's read returned the
// 2,000 rows of its block for the 60 in it). A unit may carry the range
// (WorkUnit.event_range); its rows are then the block's rows whose
// event_time lies in [start_micros, end_micros), in block order, and
// start_row, each batch's start_row and rows, and the summary count
// those, from 0 (trim.go). UnitsFromSolution gives the range to the units
// of blocks the solution's range does not cover whole (by their events,
// BlockRead.events), so Flight's GetFlightInfo, the Go client through
// sigctl read and export, and the Python client read exactly the rows in
// the range; a block wholly inside keeps a whole-block unit, byte for
// byte what it was, and so does every unit a trainer builds (it reads
// whole blocks, trainer/solution.go). An empty range is InvalidArgument
// naming event_range, as sigd refuses one.
//
// The rows are selected where the unit is read, after its columns are
// made over the whole block, whatever each input's mode: memo objects are
// per block and shared, a LOCAL input is computed over the block as a
// worker computes it, and the guard samples rows of the whole block as it
// does for any unit (the memo object it checks is the block's). The same
// selection of the same values gives SIG, LIG and mixed units of a range
// the same bytes (TestEventRanges, testdata/ranges.txt: at block edges,
// in a gap between two events, over late events, resumed from inside a
// batch). Block rows in range are usually one run (event times in order;
// the columns are sliced, no copy); late events and blocks of several
// partitions make several, copied once into new columns. The range is
// the unit's own, bound per unit: units of one input set share a plan
// whatever their ranges (plancache.go). A trimmed unit resumes like any
// other: its rows are a function of the unit (block version and range),
// so row r is the same row on every reader, and a state counting the
// unit's rows reads each once.
//
// # Arrow Flight
//
// The same gRPC server serves Arrow Flight (flight.go), so that any Arrow
// client (pyarrow.flight, the Python client in python/, Arrow's Go, Java,
// C++ or Rust clients) reads units without SIG's own messages:
//
//   - DoGet: the ticket is a marshaled ReadRequest, a unit and its start_row,
//     with Read's resume semantics. The stream is the batch schema, then
//     Read's batches, each as Flight frames a record batch (its header in
//     data_header, its body in data_body, the very bytes of Read's
//     arrow_ipc; TestFlightDoGetSendsReadsBytes) with app_metadata a
//     ReadResponse naming its start_row and rows; the block's last batch
//     also carries Read's Summary. Errors, auth and metrics are Read's.
//   - GetFlightInfo: the descriptor is a CMD holding a FlightCommand (client,
//     pipeline, range, labels, batch rows, mode), marshaled or as JSON
//     (protobuf's JSON mapping: a client without SIG's generated code
//     writes it; README, "Plain Arrow Flight clients"). The reader asks sigd for
//     the read solution (Config.Solutions; cmd/reader --sigd) forwarding the
//     caller's own bearer token, so sigd decides what the caller may read,
//     and answers one endpoint per raw block in event order: the DoGet
//     ticket of the block's unit (UnitsFromSolution) and the readers'
//     locations (Config.FlightLocations). The caller's token must therefore
//     be valid at sigd and at the readers alike (one token file, as
//     `sigd dev` writes). total_records is -1 when the range cuts a block
//     (its rows are known only when read).
//   - GetSchema: the batch schema GetFlightInfo would give for the same
//     descriptor, resolved the same way.
//   - ListActions lists none (a reader has no actions). ListFlights,
//     DoAction, DoPut, DoExchange, PollFlightInfo and Handshake answer
//     Unimplemented, each message saying what to call instead: a flight
//     is a pipeline's read over a range, resolved on request, so there is
//     nothing to list, and tokens ride on every call.
//
// A unit of no rows (a range holding none of its block's rows) sends, on
// Flight, one batch of no rows carrying the summary, so that a Flight
// client learns the unit is complete as from any other; Read sends the
// summary alone, and the summary's crc32c leaves that batch out.
//
// FlightData messages are marshaled by hand into pooled buffers, as Read's
// responses are (encodeFlight): the body buffers are copied once, from the
// columns into the message gRPC sends; data_header and data_body are what
// Arrow's own Flight writer sends (TestFlightDataMatchesArrowWriter).
// bench/flight.sh measures DoGet against Read in one run.
//
// # SIG, LIG and mixed
//
// Each input has a mode. MEMO (SIG) reads the memo object the read solution
// names; LOCAL (LIG, paper IV.B "Local Input Generation") computes the
// column from the raw block by running the component: the LOCAL inputs'
// canonical DSLs are merged into one graph and canonicalized (matching), so
// a subexpression several inputs share runs once, and each input's DSL must
// canonicalize to the component key it claims, so that a LOCAL column is
// what the memo object of that key holds. Inputs of one unit may mix modes
// (brief, "Beyond the paper" 2: the paper's input pipeline cannot join
// memoized and raw data, so SIG cannot memoize only the expensive
// transforms; here a pipeline memoizes what is worth it and computes the
// rest).
//
// A LOCAL input may also list memo nodes (ModelInput.memo_nodes): nodes of
// its component that SIG memoized, the cover matching's insertion policy
// chose (issue 20: any subgraph memoized, not only whole components). The
// reader reads each as it reads a MEMO input's object (same checks, same
// errors: a memo node not ready is a pending memo) and runs only the
// residual above them (canon.Residual, transform.CompileResidual), reading
// only the raw columns the residual needs. A memo node must be a node of the
// input's component and of its type; any subset of its nodes gives the same
// column (TestCoversEqualLIG: random fleets' graphs, random covers, bytes of
// pure LIG), so a unit lists the nodes whose blocks are ready
// (UnitInput). Memo nodes beneath another memo node are not fetched.
//
// All modes produce bit-identical responses for the same unit: the kernels
// are deterministic (transform's semantics are written to the byte), a memo
// object stores exactly what they computed, and the encoder's output depends
// only on the schema, which comes from the unit, and the values. The tests
// stream every fleet pipeline both ways and in every mix and compare every
// response's bytes (TestSIGAndLIGStreamIdenticalBytes,
// TestMixedModeEqualsPureModes).
//
// # Reading a block
//
// A unit reads each object it needs once, with one planned read
// (fetch.go; warehouse/block's ObjectReader): in the common case one
// request per object (issue 28). The raw block's footer is checked first:
// it must be the unit's block, of the unit's schema (fingerprint). Its
// event_id, the labels, the columns the LOCAL inputs' residual reads and
// those the guard's components read are then fetched together, once per
// unit however many inputs need them: ranged reads of just their
// segments, coalesced as Arrow's ReadRangeCache coalesces ranges (holes up
// to block.HoleLimit, 1.5 MiB, read rather than paid for with another
// request; ranges up to block.RangeLimit). Each memo object is read once
// for all the inputs whose columns it holds (memoObjects: inputs name
// their column in it, a pack's member column, or MemoColumn in an object
// of one component written before packs), concurrently with the raw block once its footer is known.
//
// The server keeps the footers of the objects it read last
// (Config.FooterCacheEntries): with the footer cached a read is one
// request of the wanted segments, coalesced, and of the footer behind them
// when it lies within the hole limit, read back to check that the object
// is still the one the cached footer describes. Without it, the read
// starts with one speculative tail read of the object's last
// block.TailRead bytes, which holds the footer and, for an object no
// larger (a raw block of the fleet's 10,000 rows, any memo object of one
// component of such a block), everything else; a memo object of one
// component is read from where its value segment starts, the end of the
// raw block's event_id segment (its own event_id segment is the raw
// block's, and only the footer follows its value), in one request either
// way. A cached footer that turns out stale (an object written again under
// its key, as a repaired memo object is) costs a read, never wrong bytes:
// the read is made again from the object (warehouse/block, fetch.go;
// TestStaleRawFooter). So a unit of k memo inputs in one object is two
// requests, a unit of k objects of one component each 1 + k
// (TestUnitRequests), and readers stay stateless: a cache miss is only
// slower. Every segment is checked against its CRC-32C, computed as its
// bytes arrive, and decoded without copying (block.DecodeSegment; Arrow's
// own IPC reader copies every buffer twice); a compressed segment (Arrow
// IPC buffer compression, LZ4 frame or ZSTD; warehouse/block,
// "Compression") has each buffer decompressed once instead. Old
// uncompressed and new compressed objects mix freely
// (TestCompressedSegments).
//
// A unit's plan (its checked inputs, the LOCAL inputs' program, the
// guard's programs) depends mostly on its input set, which every unit of a
// job shares: it is built once per distinct input set and kept in a small
// bounded cache (plancache.go, Config.PlanCacheEntries); each unit is
// still checked against its own block and objects.
// Raw blocks have versions (issue 21): a unit's raw_object is
// raw/<source>/<block>.arrow for version 1, raw/<source>/<block>.v<N>.arrow
// for version N, and a memo object of input version N (the version at which
// a column its component reads last changed, at most the raw version) is
// memo/<key>/<block>.v<N>.arrow; the raw footer must be that version and
// the memo footer that input version, or the unit is corrupt.
// Packed memo objects (issue 28): a MEMO input or memo node names either a
// pack of the unit's block and source with its column (memo_column, the
// component key in hex) and the input version of its data
// (memo_version), or, without a column, an object of its component alone
// as above, as every object written before packs (TestUnitReadsPacks,
// TestPackedUnitChecks, TestUnitReadsMemoWrittenBefore). What a memo input
// names is checked where the unit is bound (InvalidArgument); the inputs
// that name one object are read from it together (fetch.go). Each must
// hold the unit's component at the named block and input version, have
// the input's type and the raw block's rows (block.CheckMember, the footer
// check sigd also verifies a reported object with; checkMemoMeta), and be
// row-aligned with the raw block: its event_id column is the
// raw block's, written by the same encoder with the same compression
// (workers/memo encodes it as the raw block's), so equal segment lengths and
// CRC-32Cs in the two footers show it without fetching it; otherwise the
// memo's event ids are fetched, in the same request, and compared
// (Config.ExactAlignment always does).
//
// This is where SIG's savings come from: a SIG reader moves bytes (ranged
// reads, checksums, one copy into the batch) where a LIG reader also
// tokenizes, sorts and hashes. bench/reader.sh measures both on the same
// units in the same run; the paper reports readers 4.3x-7.5x cheaper with
// SIG.
//
// # Failures
//
// Errors are gRPC statuses with a google.rpc.ErrorInfo detail (domain
// reader.sig) naming the reason:
//
//	Unavailable         MEMO_PENDING  a MEMO input's state is not READY, or its object is
//	                                  missing (evicted); the message starts "memo pending:"
//	                                  and names the input, component and block (IsMemoPending)
//	FailedPrecondition  MEMO_FAILED   the input's memoization task was quarantined
//	DataLoss            CORRUPT       an object fails its checksums, does not decode, is of
//	                                  another component or block, or is not row-aligned
//	DataLoss            MEMO_MISMATCH the guard recomputed a sampled row of a MEMO input
//	                                  from the raw block and the memo object holds another
//	                                  value; the message names the input, component, block,
//	                                  the first differing row, its event_id and both values
//	                                  (metadata: input, component, block, row, event_id,
//	                                  guard_seed: the seed of the rows checked)
//	FailedPrecondition  GUARD_ERROR   the guard could not recompute a MEMO input's sampled
//	                                  rows and the reader runs --guard-on-error fail
//	InvalidArgument     INVALID_UNIT  the unit is malformed; the message names the field
//	NotFound            NO_BLOCK      the raw block does not exist
//	Unavailable         STORE_UNAVAILABLE  the object store failed after its own retries
//	FailedPrecondition  COMPUTE_FAILED     a LOCAL input's ops failed on this block's data
//
// A corrupt memo object, one missing although the unit says READY, or one
// the guard found holding wrong values is reported to sigd when
// Config.Reporter is set (cmd/reader --sigd, with a token of role reader),
// with the reason (CORRUPT or MEMO_MISMATCH): in the background, once a
// minute per block at most while the block keeps failing. Once sigd has
// said it is replacing the object reported and a unit of the block reads
// back, the block is forgotten, so that a later failure, of another
// object, is reported at once (report.go; issue 27: a block repaired and
// then damaged again stayed DataLoss until the minute was out). sigd
// checks the object itself, with the footer check readers make
// (block.CheckMember), so that whatever a reader refuses sigd finds
// corrupt (for a mismatch it recomputes the whole block and compares
// every row), and recomputes that block if it is bad; the read solution
// turns pending, then ready, and the same unit then reads the same bytes
// as before the corruption (TestCorruptMemoRepaired,
// TestGuardMismatchRepaired, TestDamagedFooterRepaired in sigd).
//
// # The shared-fate guard
//
// A memo object is shared by every pipeline that reads its component
// (paper VIII.E: a shared-fate risk): a worker that computed wrong values
// (a faulty machine, a kernel bug on one CPU) writes an object whose
// checksums, footer and alignment are all sound. So a reader recomputes a
// sample of each MEMO input's rows from the raw block with the component's
// canonical DSL the unit carries (guard.go; Config.GuardSampleRows, cmd/reader
// --guard-sample-rows, default 16 rows per input per unit, 0 none) and
// compares them bit for bit (transform.SameRow: two nulls are equal, a NaN
// equals a NaN of the same bits, -0 is not 0). The DSL must canonicalize
// to the input's component key, as a LOCAL input's must (InvalidArgument
// naming inputs[i].canonical_dsl); an input without one is not guarded.
// The memo nodes LOCAL inputs read (covers) are guarded the same way, with
// the node's cone in the DSL of the input listing it: the residual above a
// node takes its values on trust (TestGuardMemoNodes).
//
// The sample is rows of the raw block, not the block: every op is defined
// row by row, so a component run over a record of some rows gives exactly
// those rows of its output (TestGuardPassesHonestMemos samples every row
// of every example pipeline's inputs over blocks with nulls and finds no
// difference). The rows are drawn uniformly (Floyd's algorithm) from a seed
// of the unit's id, block and component mixed with a nonce each read draws
// (issue 27): every job reading a block sends the same unit (a trainer's
// unit id is the block's reference), so a sample of the unit alone checked
// the same rows for every job, however many pipelines shared the block.
// Drawn per read, k reads of s rows check about k·s rows, and a block with
// m wrong rows of n is caught with probability about 1 - (1 - m/n)^(k·s):
// coverage grows with reuse, as the shared-fate risk does
// (bench/guard-detection.txt measures it against the formula;
// TestGuardSampleGrowsWithReads). A failure stays reproducible: its error
// carries the seed of its sample (guard_seed; GuardSample gives its rows).
// A re-read of a block found wrong may draw a sample that misses its wrong
// rows, but the object is reported at the first failure, and sigd takes it
// out of service once its own recomputation confirms it.
// The guard's cost is mostly fetching the raw columns the guarded
// components read, whole (a segment is the unit of ranged reads and
// checksums), not the rows it recomputes: bench/reader.sh (BenchmarkGuard,
// medians of three runs on a 2-core machine at load 5-7, with the sample
// drawn per read) measured the default at 1.23-1.36x an unguarded SIG
// reader's CPU per example across the example pipelines (the raw columns
// it fetches are 0.5-0.9x the bytes a unit sends), 1024 rows at 2.0-2.1x;
// drawing the sample per read costs nothing measurable (the same
// benchmark before it, same machine, same hour: within the runs' spread).
// Config.GuardEvery (--guard-every N) guards each input in one read of N,
// picked by the same seed, for about 1/N of that. If the sample
// cannot be computed (an op fails on it), sig_reader_guard_errors_total
// counts it and the unit is served unchecked, or fails with
// FailedPrecondition GUARD_ERROR under Config.GuardOnError = GuardFail
// (--guard-on-error fail). Like LIG, the guard relies on
// readers computing what workers compute, bit for bit (transform, log1p:
// the same GOARCH and GOAMD64): a reader built otherwise fails units with
// MEMO_MISMATCH that sigd's recomputation then finds healthy, which
// sigd's sig_memo_reports_total{reason="MEMO_MISMATCH",outcome="healthy"}
// shows.
//
// A pending memo is the transient stall of the brief's training holds: the
// host releases its chips and waits for the completion event, or reads the
// input LOCAL. A quarantined one is a permanent error until an operator
// releases it (FailedPrecondition rather than the Unavailable the paper's
// "pending" would suggest, so that hosts do not retry it).
//
// The Client resumes: a reader that dies mid-stream (or is unreachable)
// costs a retry on the next reader address from the first row not yet
// received (ReadRequest.start_row). Since batches are aligned to the block,
// the resumed stream's batches are byte-identical to those the dead reader
// would have sent, and the host sees one unbroken sequence
// (TestReaderKilledMidStream kills a real cmd/reader with SIGKILL).
//
// # Cost
//
// In SIG mode a reader's CPU goes to receiving bytes from the object store,
// checksums, one copy into the batch, and gRPC. The encoder writes Arrow IPC
// itself (encode.go: the schema message once per stream, each body buffer
// copied once, offsets rebased on the way), byte for byte what Arrow's
// ipc.Writer writes; it reuses its output buffer across batches and
// streams, decoding allocates nothing per byte, gRPC marshals into buffers
// it does not zero (serverCodec), and cmd/reader runs the collector at
// DefaultGCPercent. Segments are fetched into recycled buffers that are
// not zeroed (unitBuffers: a unit's buffers go back to the pool only after
// its last batch is sent), each segment's CRC-32C is computed as its bytes
// arrive, and footers are parsed once per object, not once per unit
// (the footer cache). What remains is mostly receiving the bytes over
// HTTP: bench/reader.sh measures the same units' object store requests
// alone (BenchmarkFetch), a cost the bare gRPC server it compares with
// does not pay. A request costs what about 1.5 MiB of its bytes do, the
// reader's and MinIO's CPU together (BenchmarkRangeCost), which is why a
// unit of a few hundred rows paid mostly for its requests and its plan:
// bench/requests.sh measures requests and CPU per unit at 700, 10,000 and
// 100,000 rows before and after issue 28 in one run
// (BenchmarkUnitCost; bench/requests.txt).
//
// Readers authenticate callers with internal/auth tokens (roles trainer, for
// units of its own client, and operator) and bound request sizes and
// concurrent units (Config).
//
// # Operations
//
// With Config.Registerer a Server exports its metrics (metrics.go): units
// served, rows and bytes sent (Read and Flight's DoGet alike), input columns
// by mode, calls by API (read, flight_do_get, flight_get_flight_info),
// failed calls by the gRPC code the caller got (counted by an interceptor
// outside authentication, so a refused token counts), the time to
// fetch a unit's block, the object store requests of units' reads by
// object and kind (sig_reader_object_requests_total: over
// sig_reader_units_total, the requests per unit read), the bytes of the
// segments those reads wanted by object
// (sig_reader_object_wanted_bytes_total: the floor under what the store
// sends, which also holds the holes coalesced and the tails read whole;
// the fleet reports both, and bench/fleet-reads.txt sweeps the hole limit
// and tail read, Config.ReadLimits, cmd/reader --read-hole-limit and
// --read-tail), the footer and plan caches' lookups, and the guard's rows checked, mismatches by
// component (sig_reader_memo_mismatches_total) and samples it could not
// compute. cmd/reader
// serves them on --metrics, and health and reflection beside the Reader
// service (internal/grpcsvc).
package reader

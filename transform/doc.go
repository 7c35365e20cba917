// Package transform owns SIG's transformation graphs (paper IV.A): the graph
// model, the op registry with the exact semantics of every op, validation,
// the text DSL (parser and printer), the vectorized op kernels on Arrow
// arrays, and the executor that runs a graph, or one component of it, over
// one block of raw events.
//
// It does not canonicalize graphs or compute component keys (package
// matching), decide what to memoize or where (matching, workers), nor read
// or write blocks (warehouse). It depends on nothing else of ours.
//
// SIG memoizes what the kernels compute and local input generation (LIG)
// recomputes it, so both must produce bit-identical columns. That is why
// the semantics below are written down to the byte, why a change to any of
// them needs the op's Version bumped (which changes every component key
// using it), and why the kernels are tested cell by cell against an
// independent row-at-a-time implementation (internal/rowref) written from
// this text.
//
// # Graph model
//
// A Graph is a DAG of Nodes. A Node applies an op (by name) to the outputs
// of other nodes (Inputs, indices into Graph.Nodes) with named parameters
// (Params). A node's Name is the let binding that named it in the DSL: a
// label for humans that never changes what is computed nor any key. A
// ModelInput names the node whose output a model consumes.
//
// Every node has one of five types, stored as these Arrow types:
//
//	string        Utf8 (32-bit offsets)
//	int64         Int64
//	float64       Float64
//	list<string>  List<Utf8> (32-bit offsets)
//	list<int64>   List<Int64> (32-bit offsets)
//
// Any row of any column may be null. A list row may also hold null
// elements (raw data from elsewhere may); see "Nulls" below.
//
// # Validation
//
// Check validates a graph against a source Schema and a Registry and
// normalizes it in place. It checks every node, dead ones included: op
// known, number of inputs, input references in range, no cycle, parameter
// names known and not repeated, required parameters present, parameter
// kinds and ranges, types (each op's Infer), raw columns in the schema, and
// the size Limits. Normalization makes a graph's canonical form
// independent of how it was written: missing parameters get their
// defaults; an integer parameter given an integral number (2.0, at most
// 2^53 in magnitude) becomes an integer; a number parameter given an
// integer becomes a float64; -0 becomes 0; fill_missing's default takes the
// kind of its input type; parameters are sorted by name. Every float
// parameter must be finite and every string valid UTF-8, since the DSL can
// write nothing else and a graph must survive Print and Parse.
//
// Errors are *Error values. From DSL text they carry the line and column
// ("model.sig:3:17: ..."); for graphs built in code or received over gRPC
// they name the node ("node 4 (hash): ..."); a few are about the whole graph
// and carry neither ("graph has no model inputs ..."). The gRPC frontend
// returns the same text with code InvalidArgument.
//
// # The DSL
//
// One statement a line. A statement names an expression with `let` (a
// binding, used by other statements) or `input` (a model input):
//
//	let q      = unigrams(lower(col("query")))
//	let t      = unigrams(lower(col("ad_title")))
//	input qa_overlap = concat(intersect(q, t), col("ad_category"))
//	input query_ids  = hash(q, buckets=1000003)
//	input price_bin  = bucketize(col("bid_price"), boundaries=[0.1, 0.5, 1, 5])
//
// Grammar (EBNF; NEWLINE ends a statement except inside parentheses and
// brackets, so a call may span lines):
//
//	file  = { [ stmt ] NEWLINE } [ stmt ] .
//	stmt  = ( "let" | "input" ) NAME "=" expr .
//	expr  = NAME | OP "(" [ arg { "," arg } [ "," ] ] ")" .
//	arg   = expr | NAME "=" lit | STRING .          (STRING: only col's first argument)
//	lit   = INT | NUMBER | STRING | "[" [ num { "," num } [ "," ] ] "]" .
//	num   = INT | NUMBER .
//
// Graph arguments come first, then named parameters (`ngrams(s, n=3)`);
// col's column name may be written bare (`col("query")`) or named
// (`col(name="query")`). Lexical rules:
//
//   - NAME and OP: an ASCII letter or '_', then ASCII letters, digits or
//     '_' (IsIdent). `let` and `input` are keywords and cannot be names.
//   - STRING: a Go double-quoted string literal on one line (strconv.Unquote
//     escapes: \n \t \" \\ \xHH \uHHHH \UHHHHHHHH ...). Both the text as
//     written and the decoded value must be valid UTF-8.
//   - INT: optional sign and decimal digits, within int64. NUMBER: optional
//     sign, digits with a '.' or an exponent (1.5, .5, 1e-3, -2.5E+10),
//     finite as a float64. There are no NaN, infinity or hex literals.
//   - '#' starts a comment that runs to the end of the line. Spaces, tabs
//     and carriage returns separate tokens.
//   - Positions are 1-based lines and columns; columns count bytes.
//
// Names: `let` and `input` names share one namespace and must be unique.
// A name may be used before the line that defines it (statement order never
// matters), so a reference loop is reported as a cycle. `let r = q` is an
// alias: it creates no node. `input b = a` makes b a second model input on
// a's node. A let nobody uses (a dead node) is still checked.
//
// Parse builds the graph in dependency order (a statement after every
// binding it uses, ties broken by source order), each expression in
// post-order, so a statement's nodes are contiguous. Print writes a
// statement for every node that is named by a let, is a model input's
// output, or is used more than once (naming unnamed shared nodes of graphs
// built in code _n<index>), inlines everything else, and writes
// statements in node order. Hence for any graph g produced by Parse,
// Parse(Print(g)) is Equal to g, before and after Check; the fuzz tests
// check this. Print writes numbers so that they read back bit for bit.
//
// # Limits
//
// Limits bound everything that reaches SIG, from text or over gRPC, before
// anything is stored (zero fields take the defaults):
//
//	MaxSourceBytes  1 MiB    DSL text size (Parse; the error points at the first byte past it);
//	                         a graph message, the fewest bytes of DSL that could write it
//	                         (MinSourceBytes, in transform/graphpb)
//	MaxNodes        10000    nodes in a graph (Parse, Check)
//	MaxDepth        256      ops on the longest path from a model input to a raw column,
//	                         col included (Check); also how deep one expression may nest (Parse)
//	MaxInputs       1024     model inputs (Check); Parse also refuses more than
//	                         MaxNodes+MaxInputs statements
//	MaxArgs         64       inputs of one node (Check)
//	MaxListLen      1024     elements of a list parameter (Parse, Check)
//	MaxStringLen    4096     bytes of a string literal or parameter (Parse, Check)
//	MaxNameLen      128      bytes of a name: let, input, op or parameter (Parse); input and
//	                         node names, which must also be identifiers, not keywords, and
//	                         distinct, as in the DSL (Check)
//
// So a graph built in code or received as a message is held to the DSL's
// rules for names, and Print writes (and sigd stores) the names it was given.
//
// At run time, cross fails on a row with more than MaxCrossPairs (65536)
// pairs, and an output column over 2^31-1 bytes or elements (the Arrow
// 32-bit offsets) fails its op with a *PanicError.
//
// # Op semantics
//
// The rules common to all ops come first; each op's exact definition is
// its OpSpec.Doc (ops.go), repeated here.
//
// Nulls. Each op says what a null row gives: ops that map values
// (lower, strip_punct, unigrams, ngrams, truncate, hash, bucketize, log1p,
// clip) give null; ops that build lists from several arguments (intersect,
// union, concat, cross) and dedupe read a null argument as empty and never
// give null; length gives 0 and fill_missing its default. Null elements
// inside an input list are dropped before an op sees the list, by every
// op: length counts non-null elements, hash of a list returns fewer
// elements, and so on. No op ever outputs a null list element. The empty
// string and the empty list are values, not missing: lower("") = "",
// unigrams("") = [], hash("") hashes zero bytes, fill_missing keeps "".
// What lies under a null output row is unspecified (a kernel may pass the
// input's bytes through): readers must not look.
//
// Promotions. intersect, union, concat and cross take scalars and lists
// alike: a scalar counts as a one-element list (a null scalar as empty).
// All arguments of intersect, union and concat must have the same element
// type (string or int64); the output is a list of it.
//
// Set outputs. intersect, union and dedupe return their values sorted
// ascending and unique: int64 numerically, strings bytewise (Go string
// order, which is code point order for valid UTF-8). That makes them
// commutative and associative, which canonicalization uses.
//
// Unicode. lower, strip_punct, unigrams and ngrams use Go's unicode package
// tables, Unicode UnicodeVersion (15.0.0). A Go release with new tables
// fails TestUnicodeVersionIsDocumented; those four ops' versions must then
// be bumped. Text is UTF-8; an "invalid byte" is one that utf8.DecodeRune
// decodes as (U+FFFD, 1): a stray continuation byte, each byte of a
// truncated or overlong sequence, each byte of an encoded surrogate. lower
// and strip_punct replace each invalid byte by U+FFFD (EF BF BD);
// tokenization keeps them unchanged inside tokens; hash hashes the bytes as
// stored. No op normalizes (NFC/NFKC) text.
//
// Tokenization (unigrams, ngrams). Tokens are the maximal runs of code
// points that are not white space, in order, duplicates kept, bytes copied
// unchanged: exactly strings.Fields. White space is unicode.IsSpace: '\t',
// '\n', '\v', '\f', '\r', ' ', U+0085, U+00A0, U+1680, U+2000-U+200A,
// U+2028, U+2029, U+202F, U+205F, U+3000. U+200B (zero width space) and
// U+FEFF are not space, nor are invalid bytes. Punctuation stays inside
// tokens ("shoes," is one token): apply strip_punct first to drop it.
//
// The stable hash (hash, cross). With golden = 0x9E3779B97F4A7C15 and
// fmix64 the 64-bit finalizer of MurmurHash3
// (k ^= k>>33; k *= 0xff51afd7ed558ccd; k ^= k>>33; k *= 0xc4ceb9fe1a85ec53; k ^= k>>33):
//
//	h(x)        = XXH64(bytes(x)) with seed 0 (github.com/cespare/xxhash/v2)
//	bytes(x)    = the string's bytes as stored; an int64's 8 bytes, little-endian
//	hash(x)     = fmix64(h(x) + uint64(salt)*golden) mod buckets
//	cross(x, y) = fmix64(h(x)*golden + h(y)) mod buckets
//
// all in uint64 arithmetic (mod 2^64), the result in [0, buckets) as an
// int64. The hash never depends on the machine, the process or the Go
// version.
//
// The ops, with their parameters (defaults in the signature):
//
//	col("name")
//	    A raw column of the source; its type is the schema's. Run reads it
//	    from the record, which must carry it with the schema's Arrow type
//	    (CheckRecord).
//	lower(s)                      string -> string, list<string> -> list<string>
//	    The simple lowercase mapping of every code point (unicode.ToLower),
//	    without context or locale: Σ -> σ (never ς), İ (U+0130) -> i, I -> i
//	    (never ı), Kelvin sign -> k; code points without a mapping (ß, ς, 日)
//	    unchanged. No full case folding (ß stays ß). The byte length may
//	    change. Each invalid byte becomes U+FFFD. Elementwise on lists.
//	    null -> null. Idempotent: lower(lower(x)) = lower(x), checked for
//	    every code point.
//	strip_punct(s)                string -> string, list<string> -> list<string>
//	    Deletes every code point of general category P (unicode.IsPunct):
//	    ! " # % & ' ( ) * , - . / : ; ? @ [ \ ] _ { } ¡ § « » ¿ — … 、 。 and
//	    the rest. Keeps symbols (category S: $ + < = > ^ ` | ~ € ©),
//	    letters, marks, digits and spaces, without collapsing spaces. Each
//	    invalid byte becomes U+FFFD (a symbol, so kept). Elementwise on
//	    lists. null -> null. Idempotent.
//	unigrams(s)                   string -> list<string>
//	    The tokens of s (see Tokenization). "" and all-space strings give
//	    []. null -> null.
//	ngrams(s, n=2)                string -> list<string>; 1 <= n <= 16
//	    The tokens of s, then every run of n consecutive tokens joined by
//	    one U+0020, in order; only the n-grams, so ngrams(s, n=1) =
//	    unigrams(s). Fewer than n tokens give []. null -> null.
//	intersect(a, b, ...)          1 to MaxArgs arguments -> list of their element type
//	    The values present in every argument, sorted and unique. Never
//	    null. intersect(x, x) = intersect(x) = dedupe(x) for a list x.
//	union(a, b, ...)              1 to MaxArgs arguments -> list of their element type
//	    The values present in any argument, sorted and unique. Never null.
//	    union(x, x) = union(x) = dedupe(x) for a list x.
//	concat(a, b, ...)             1 to MaxArgs arguments -> list of their element type
//	    The elements of every argument in argument order, duplicates kept.
//	    Associative, not commutative. Never null.
//	dedupe(l)                     list<T> -> list<T>
//	    The distinct values of l, sorted: union(l). null -> []. Never null.
//	truncate(l, max=100)          list<T> -> list<T>; 0 <= max <= 2^20
//	    The first max elements of l. null -> null.
//	length(l)                     list<T> -> int64
//	    The number of elements of l. null -> 0. Never null.
//	hash(x, buckets=1048576, salt=0)
//	                              string, int64 -> int64; list<string>, list<int64> -> list<int64>
//	    hash(x) above; 1 <= buckets <= 2^62, salt any int64. Elementwise on
//	    lists, order kept. null -> null.
//	cross(a, b, buckets=1048576)  two of string, int64, list<string>, list<int64> -> list<int64>
//	    cross(x, y) above for every pair, x from a and y from b, a-major (for
//	    each x in order, each y in order), duplicates kept. Not commutative.
//	    Never null; [] if either side is empty. A row with more than 65536
//	    pairs fails the op.
//	bucketize(x, boundaries=[...]) int64, float64 -> int64
//	    The number of boundaries b with b <= x, in [0, len(boundaries)];
//	    boundaries: 1 to 1024 finite numbers, strictly increasing. An int64
//	    is converted to float64 first (rounding to nearest above 2^53).
//	    -Inf -> 0, +Inf -> len(boundaries). null and NaN -> null.
//	log1p(x)                      int64, float64 -> float64
//	    math.Log1p(float64(x)): NaN below -1 and for NaN, -Inf at -1.
//	    null -> null. The Go compiler may fuse floating-point multiply-adds
//	    on some targets (arm64, amd64 with GOAMD64=v3 and up), which can
//	    change the last bit of math.Log1p: every binary that computes
//	    memoized columns or LIG must be built for the same GOARCH and
//	    GOAMD64.
//	clip(x, lo=, hi=)             int64 -> int64, float64 -> float64; lo <= hi, both finite
//	    float64: min(max(x, lo), hi) as math.Max and math.Min order values
//	    (-0 < +0, so clip(-0, lo=0, hi=1) = +0); NaN is returned unchanged,
//	    bits included. int64: min(max(x, ceil(lo)), floor(hi)), the bounds
//	    saturated to the int64 range; if ceil(lo) > floor(hi) (lo=0.5,
//	    hi=0.7) every value becomes floor(hi). null -> null.
//	fill_missing(x, default=)     string, int64, float64 -> the same type
//	    x with null rows replaced by default, which must be a string for
//	    string x, an integer for int64 x (an integral number is accepted),
//	    a finite number for float64 x. NaN and "" are values, not missing.
//	    Never null.
//
// Identities that hold under these semantics (canonicalization in package
// matching applies them; the tests check them on random data through the
// kernels): lower, strip_punct and dedupe are idempotent; dedupe of a set
// op is the set op; intersect and union are commutative and associative,
// concat associative; intersect(x, x) = union(x, x) = intersect(x) =
// union(x) = dedupe(x) for a list x; a dedupe argument of intersect or
// union can be replaced by its input; truncate(truncate(x, max=a), max=b)
// = truncate(x, max=min(a, b)); ngrams(s, n=1) = unigrams(s).
//
// # Execution
//
// A Kernel computes one op over whole Arrow columns. Kernels read Arrow
// buffers directly (offsets, bytes, validity bits: column.go), handle
// sliced arrays (non-zero offsets, in the list's child too) and null slots
// with arbitrary bytes underneath, and build outputs into preallocated Go
// slices that become Arrow buffers without copying; they never allocate
// per row. Outputs share what they can with inputs, since Arrow arrays are
// immutable: where the output equals the input (lower of text that is
// already lower-case ASCII, truncate when no row is longer than max,
// fill_missing without nulls) the kernel returns the input array itself,
// retained; ops that map list elements one for one (lower, strip_punct,
// hash on lists) reuse the list's offsets and validity; numeric ops reuse
// the input's validity. truncate that shortens rows returns a list-view
// (Arrow's list layout with an offset and a size per row) over its input's
// elements, as a Go loop's row[:max] shares a row's strings; hash and
// length read it as it is, and Run copies the kept elements into a list,
// once, before any other kernel reads it and before returning it, so that
// the columns Run returns (which are stored and sent) are always lists.
// Other speed-ups, each exact: ASCII text is
// processed 8 bytes at a time; the set ops sort keys carrying an 8-byte
// integer prefix and intersect small rows without sorting; hash inlines
// XXH64 for int64s and remembers the buckets of recently seen short
// strings (categorical columns repeat; the memo turns itself off on data
// that does not). kernels.go lists them.
//
// Run executes a checked graph over one record (a block of raw events) and
// returns the requested nodes' columns; nodes several requests share are
// computed once, and intermediates are released as soon as their last
// user has run. A kernel that panics fails only its own Run with a
// *PanicError (brief, "Beyond the paper" 4: a small blast radius). Run
// trusts its record to carry the schema's Arrow types (CheckRecord checks
// that); records read from outside the process go through Conform first.
// Conform is where Arrow from outside SIG (a raw Arrow file, a raw block
// object) meets the schema, once, before anything reads it: it checks each
// column's layout against its buffers and converts every Arrow encoding
// another producer may write for a DSL type to the type above:
//
//	string        large_utf8, string_view (utf8_view)
//	int64         int8, int16, int32, uint8, uint16, uint32; uint64 when every value fits
//	float64       float32, float16 (exact)
//	any scalar    dictionary-encoded (any integer index type; the dictionary in any
//	              encoding above), run-end encoded (int16, int32 or int64 run ends)
//	list<T>       large_list, list_view, large_list_view, fixed_size_list, whatever the
//	              element field's name ("element", as Parquet readers name it) or
//	              nullability, with elements in any encoding of T
//
// A converted column's buffers are exactly as long as its rows need, as
// Arrow C++ makes them. Every other type is refused (float64 for int64,
// binary for string) with an error naming the column and both types, and
// so is a column too large for 32-bit offsets. A column that already has
// the schema's type is taken as it is, retained, not copied: its layout is
// checked (offsets read, never values), which costs a pass over its
// offsets.
//
// # Computing over raw columns
//
// A Program is the one way SIG computes model inputs or a component over
// raw columns: the worker computing a memo object (workers/memo), sigd
// recomputing one to confirm a reported mismatch (sigd's guard), a reader
// computing LOCAL inputs and its guard's sampled rows (reader), and
// `sigctl run` over a raw Arrow file. All of them must give the same
// column bit for bit (memo objects equal local recomputation; SIG and LIG
// batches are byte-identical), so none of them assembles the steps on its
// own. Compile (a Graph), CompileDSL (text) or CompileResidual (the
// residual canon.Residual leaves above memoized nodes, whose columns are
// given) does the per-graph work once: check against the schema, choose
// the outputs (the graph's model inputs, in order), and know the raw
// columns read (Program.Columns: event_id, then the columns the outputs
// need that no given node covers, sorted). Program.Run then does the
// per-record work: Conform the record's Columns to the schema's types,
// check the given nodes' columns (every one given, of the node's type and
// the record's rows), run, return the outputs. Program.Conform is the
// first step alone, for callers that need the conformed event_id as well
// (a memo object's, a batch's); Run takes a record it returned as it is.
// Errors of the record wrap ErrColumn (a reader reports a corrupt block);
// an op's failure does not.
//
// Reading the record is the caller's: the worker through its segment
// cache, the reader with pooled ranged fetches, sigd with plain reads,
// sigctl from a file; Program.Columns says what to read. A Program holds
// its own copy of its graph and changes nothing after Compile, so one may
// run over several records at once.
//
// bench/transform.sh measures every kernel against rowref's plain Go loop
// on a million rows of Ads-like data; bench/transform.txt holds the last
// report.
package transform

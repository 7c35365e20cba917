// Package arrowfile reads Arrow IPC files that come from outside SIG (the
// raw file of `sigctl run`, a segment of a block object another program
// wrote: Read takes any io.ReaderAt), where any byte may be wrong.
//
// Arrow's Go reader trusts a file's metadata: a vector length in the
// footer's flatbuffer sizes a Go slice before anything is read (a few
// flipped bits ask for hundreds of gigabytes, and the process dies of an
// out-of-memory error no recover can catch), a child field may point back
// at its parent (endless recursion, a fatal stack overflow), a buffer
// length sizes an allocation before the read that would fail, and other
// inconsistencies panic. So before Arrow sees the file, ReadFile checks the
// footer's flatbuffer where the reader allocates or recurses by it (every
// vector within the footer, fields nested at most MaxNesting deep and no
// more of them than the footer has bytes for, every record batch within
// the file); it gives Arrow an allocator with a budget proportional to the
// file (BudgetBase, BudgetPerByte; the allocator is BudgetAllocator, which
// the reader's client gives Arrow for the IPC streams it receives); and it
// turns any remaining panic into an error naming the file.
//
// ReadColumns reads a file on disk as Polars and pyarrow do: memory-mapped,
// only the columns a caller names, their buffers used where they lie in the
// file (Arrow Go v15's reader copies every column twice, which was most of
// `sigctl run` for a cheap graph). It keeps ReadFile's footer checks, and
// adds its own where it walks a record batch's message in place of Arrow's
// reader: every field node and buffer within the message and the batch's
// body, nothing allocated by a stated length. Its records live only during
// the caller's function (the file is unmapped after the last), and a file
// that shrinks while mapped (its pages fault) is an error, not a SIGBUS.
// Batches it does not decode in place (compressed, dictionary-encoded
// columns read, big-endian files) go through Arrow's reader as in ReadFile.
// warehouse/block decodes its own segments (SIG's types, written by SIG)
// without copying too; this is the reader of any Arrow file.
//
// What it does not check: the arrays' contents (lengths, offsets) against
// their buffers; transform.Conform does that for the columns a caller
// reads, and converts their types to the schema's.
package arrowfile

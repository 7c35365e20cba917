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
// What it does not check: the arrays' contents (lengths, offsets) against
// their buffers; transform.Conform does that for the columns a caller
// reads, and converts their types to the schema's.
package arrowfile

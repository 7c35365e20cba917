// Package blockref names raw block versions and memo entries' blocks: the
// one type of each, parsed once where it enters a process and compared as
// values everywhere else (after Pebble's base.SeqNum and InternalKey, one
// type from the memtable to the SSTable).
//
// A raw block can change after it is sealed (late events, label updates,
// deletions, issue 21); each change is a new version of the block, written
// whole. Two numbers are called a version, and they must not be mixed:
//
//   - Ref is a raw block version: a block id and the version of the raw
//     object (raw/<source>/<id>.arrow for version 1,
//     raw/<source>/<id>.v<N>.arrow for N >= 2). A trainer's work unit is a
//     Ref; the catalog keeps every Ref.
//   - Memo is a memo entry's block: a block id and an input version, the
//     version at which a raw column the component reads last changed
//     (block.Meta.InputVersion). A label update makes a new Ref and leaves
//     every feature component's Memo as it was, so nothing is recomputed.
//
// Both print as the warehouse names them, "<id>" for version 1 and
// "<id>.v<N>" for N >= 2 (block ids never contain '.', warehouse/block.ID),
// and parse back with Parse and ParseMemo. Objects and records written
// before blocks had versions carry version 0 or none, which means 1: New
// and NewMemo apply that rule, the only place it is written, so every Ref
// and Memo holds a version of at least 1 and two values naming the same
// version are equal (==).
//
// The package imports nothing of SIG's: the trainer's decision logic
// (trainer/control) names units by Ref without linking storage code.
package blockref

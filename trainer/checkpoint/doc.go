// Package checkpoint writes and reads the trainer's checkpoints in object
// storage (Ads paper III: "Checkpoint Files stored in a distributed
// disk-based file system"; III.C: the controller writes a checkpoint at the
// end of every epoch, and a failed epoch is retrained from the last one).
//
// A checkpoint of pipeline P is these objects under
// block.CheckpointKey(P, ...):
//
//	checkpoints/P/0000000042/S/model.bin      the model's parameters (model.Model.MarshalBinary)
//	checkpoints/P/0000000042/S/ledger.bin     the ledger: every event id trained into the model
//	checkpoints/P/0000000042/S/goodput.json   the job's goodput history (optional)
//	checkpoints/P/0000000042/MANIFEST.json    written last
//
// The sequence number is the number of committed epochs; S names the Save
// that wrote the objects (random). A Save can commit although it reports a
// failure (the manifest landed, the answer was lost): the controller then
// retrains the epoch and saves the same sequence number again, and because
// that Save's objects have names of their own it never overwrites those the
// committed manifest names — a crash before its manifest replaces the old
// one leaves a checkpoint that loads. The manifest names
// the other objects with their sizes and CRC-32C and carries the progress
// (epochs, committed units, phase, steps). The goodput history
// (trainer/accounting/goodput.History as JSON, opaque here) lets a restarted controller
// continue its job's goodput timeline; a manifest without it, as written
// before it existed, reads as before. Beside the sequence directories,
// checkpoints/P/goodput-journal.json is the controller's journal of that
// history between checkpoints (PutJournal, Journal): not part of any
// checkpoint, overwritten in place, never needed for training. A checkpoint
// exists only once its manifest does, and the manifest is written whole
// after the objects it names, so a checkpoint cut short by a crash is never
// read: Latest returns the manifest with the highest sequence number that
// reads back and parses, and Load checks each object it names against the
// size and checksum the manifest records. Objects of Saves that did not
// commit are left behind until their sequence number is pruned.
//
// The ledger makes exactly-once training checkable: for every committed
// work unit it lists the event ids trained, in training order, as runs of
// consecutive ids. An event trained twice shows up twice; Ledger.Check
// reports it. The controller also checks, before writing, that each unit's
// ledger holds exactly the unit's rows with no repeats. A compacted
// block's unit (issue 28) carries its lineage, its parts (UnitLedger.Parts;
// the ledger is then written as SIGLEDGER2, read beside SIGLEDGER1): Check
// counts the compacted block's version 1 and its parts' units at the
// versions compacted as the same event versions, trained once among them
// all, and its later versions as newer ones.
//
// What the package does not own: when to checkpoint and what an epoch
// commits (trainer/control), the ledger check before a write (package
// trainer), the model's bytes (trainer/model), what the goodput history
// says (trainer/accounting/goodput), and object storage itself
// (warehouse/objstore; the package takes a Bucket, the four calls it
// makes, so that its tests run on objstore/memstore).
package checkpoint

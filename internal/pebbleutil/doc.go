// Package pebbleutil holds what every Pebble store of the project shares:
// opening a database with a chosen durability and without Pebble writing to
// stderr, an error that names the process holding a store another process
// has open (LockedError), prefix scans, and the sig_pebble_* metrics of a
// process's stores (Collector: block cache, compactions, memtables, read
// amplification, size on disk).
//
// What it does not own: any store's keys or records (each store's package:
// matching, workers, warehouse/catalog, featstats).
package pebbleutil

// Package topics creates the Kafka topics SIG reads and writes when a
// process that uses them starts: sigd (raw.<source> and raw.<source>.dlq of
// each ingested source, and sig.memo.ready, which it publishes), `sigctl
// ingest` and `sigctl gen`. It is the one way topics come to exist, against
// real brokers and the embedded kfake of development mode alike:
//
//   - A consumer that starts before the first record is written finds the
//     topic instead of "Unknown topic or partition".
//   - Nothing depends on the broker creating topics on first use
//     (auto.create.topics.enable), which production clusters often disable
//     and which kfake does not persist: a topic it auto-created is forgotten
//     when the process is killed, with every record in it.
//
// Ensure lists the topics first and creates only the missing ones, so a
// principal allowed to describe but not to create topics works against
// topics an administrator created; an existing topic is left as it is,
// whatever its partition count.
//
// What it does not own: which topics a component uses (warehouse/ingest,
// warehouse/ready name theirs) and the clients (callers pass theirs).
package topics

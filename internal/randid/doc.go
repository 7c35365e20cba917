// Package randid makes the project's random names: session ids and CSRF
// tokens of the operator console, audit ids, generated tokens and
// credentials, and the ids of a controller's run or a checkpoint's save.
// All are crypto/rand bytes in hex, so that none can be guessed and all
// read the same in logs.
//
// What it does not own: keys derived from content (canonical keys,
// block ids), which must be deterministic.
package randid

// Package units formats quantities for people (CLIs, the web UI).
//
// What it does not own: the quantities themselves, nor machine-readable
// output (JSON keeps raw numbers).
package units

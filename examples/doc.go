// Package examples embeds the example model graphs, so that `sigctl demo`
// runs on built-in defaults from any directory.
//
// What it does not own: the DSL (package transform) or what the demo does
// with the graphs (cmd/sigctl).
package examples

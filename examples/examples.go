package examples

import "embed"

// Fleet holds a small fleet of Ads models (fleet/*.sig) whose graphs share
// components written in different ways.
//
//go:embed fleet/*.sig
var Fleet embed.FS

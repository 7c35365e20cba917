// Package graphpb converts between the graph model of package transform and
// its protobuf form in proto/sig/v1, checking every field on the way in.
//
// What it does not own: the graph's validation rules and limits (package
// transform's Check, which both the DSL and the message pass through), nor
// the RPCs that carry it (sigd).
package graphpb

package reader

import (
	"strings"
	"testing"

	flightpb "github.com/apache/arrow/go/v15/arrow/flight/gen/flight"
	"google.golang.org/protobuf/proto"

	readerv1 "github.com/sigdata/sig/proto/reader/v1"
)

// TestFlightCommandForms: a descriptor's command is read as JSON or as a
// marshaled FlightCommand by its first bytes (jsonCommand). A marshaled
// command whose client name is 123 bytes long starts "\n{" (client's tag,
// then the length), as JSON after a newline does: it is still read
// marshaled, and JSON with leading whitespace is still JSON.
func TestFlightCommandForms(t *testing.T) {
	marshal := func(c *readerv1.FlightCommand) []byte {
		b, err := proto.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	long := strings.Repeat("c", 123)
	for _, tc := range []struct {
		name           string
		cmd            []byte
		client, errSub string
	}{
		{"marshaled", marshal(&readerv1.FlightCommand{Client: "ctr", Pipeline: "p"}), "ctr", ""},
		{"marshaled, a 123-byte client", marshal(&readerv1.FlightCommand{Client: long, Pipeline: "p"}), long, ""},
		{"JSON", []byte(`{"client": "ctr", "pipeline": "p"}`), "ctr", ""},
		{"JSON after whitespace", []byte("\n \t{\"client\": \"ctr\", \"pipeline\": \"p\"}"), "ctr", ""},
		{"JSON with an unknown field", []byte(`{"client": "ctr", "pipeline": "p", "bogus": 1}`), "", "descriptor.cmd"},
		{"neither", []byte{0xff, 0xff, 0xff}, "", "descriptor.cmd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := flightCommand(&flightpb.FlightDescriptor{Type: flightpb.FlightDescriptor_CMD, Cmd: tc.cmd})
			if tc.errSub != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errSub) {
					t.Fatalf("got %v, %v; want an error naming %s", c, err, tc.errSub)
				}
				return
			}
			if err != nil || c.Client != tc.client || c.Pipeline != "p" {
				t.Fatalf("got %v, %v; want client %q pipeline p", c, err, tc.client)
			}
		})
	}
}

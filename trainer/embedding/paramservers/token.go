package paramservers

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sigdata/sig/internal/auth"
	"github.com/sigdata/sig/internal/randid"
)

// jobToken is the secret a job's own parameter servers admit, and nothing
// else does: every SIG service refuses an unauthenticated caller, and a
// `trainer ps` process serves the tables of one job, so the job makes a
// token for them when it starts them (Start) rather than handing them its
// sigd token, which would let a server act for the job at sigd.
//
// A server learns it from a token file (internal/auth's format, the one
// every SIG service reads) named on its command line by its path (--tokens
// FILE): the secret itself is on no command line, which `ps` shows to
// every user. The file is written for each start of a server, in a new
// directory only the job's user can read (0700, the file 0600), and
// removed as soon as the server listens — it has read its tokens by then —
// or has exited, so the secret is on disk only while a server starts, and
// a controller killed outright leaves none behind but for that moment.
type jobToken struct {
	secret string
	entry  auth.File
}

// newJobToken makes a fresh secret of role trainer for client.
func newJobToken(client string) *jobToken {
	t := &jobToken{secret: randid.Hex(32)}
	t.entry = auth.File{Tokens: []auth.Entry{{Token: t.secret,
		Principal: auth.Principal{Name: "job of client " + client, Role: auth.RoleTrainer, Client: client}}}}
	return t
}

// writeFile writes the token file for one start of a server and returns
// its path and the function that removes it.
func (t *jobToken) writeFile() (path string, remove func(), err error) {
	dir, err := os.MkdirTemp("", "sig-ps-token-") // mode 0700
	if err != nil {
		return "", nil, fmt.Errorf("parameter servers: token: %w", err)
	}
	remove = func() { _ = os.RemoveAll(dir) }
	path = filepath.Join(dir, "tokens.json")
	b, err := json.Marshal(t.entry)
	if err == nil {
		err = os.WriteFile(path, b, 0o600)
	}
	if err != nil {
		remove()
		return "", nil, fmt.Errorf("parameter servers: token: %w", err)
	}
	return path, remove, nil
}

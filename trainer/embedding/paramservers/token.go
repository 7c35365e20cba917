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
// The servers learn it from a token file (internal/auth's format, the one
// every SIG service reads), named on their command line by its path
// (--tokens FILE): the secret itself is on no command line, which `ps`
// shows to every user, and the file and its directory are the job's user's
// alone (0600, 0700). A server restarted after a crash reads the same file;
// the directory is removed when the job stops its servers.
type jobToken struct {
	secret string
	dir    string
	file   string
}

// newJobToken writes a fresh secret of role trainer for client to a new
// private directory.
func newJobToken(client string) (*jobToken, error) {
	dir, err := os.MkdirTemp("", "sig-ps-token-") // mode 0700
	if err != nil {
		return nil, fmt.Errorf("parameter servers: token: %w", err)
	}
	t := &jobToken{secret: randid.Hex(32), dir: dir, file: filepath.Join(dir, "tokens.json")}
	b, err := json.Marshal(auth.File{Tokens: []auth.Entry{{Token: t.secret,
		Principal: auth.Principal{Name: "job of client " + client, Role: auth.RoleTrainer, Client: client}}}})
	if err == nil {
		err = os.WriteFile(t.file, b, 0o600)
	}
	if err != nil {
		t.remove()
		return nil, fmt.Errorf("parameter servers: token: %w", err)
	}
	return t, nil
}

// remove deletes the token file: the servers it admitted to are stopped.
func (t *jobToken) remove() { _ = os.RemoveAll(t.dir) }

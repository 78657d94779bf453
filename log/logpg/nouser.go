package logpg

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/provlog/provlog/log"
)

// What the store's errors say of the database they come from. An operator
// needs the host, port and database to find what refused the store; the
// user it connects as is half a credential, and the password is never
// shown. pgx names the user in every failure to connect ("failed to
// connect to `user=X database=Y`"), and the server in its refusals
// ("password authentication failed for user \"X\"", "role \"X\" does not
// exist"), and these errors reach stderr, /healthz and provlog__status:
// every place the store gets a connection (Open, a commit's, a read's, the
// read-back's, the listener's) passes its failure through [Store.noUser].

// noUser returns err with the store's user cut from its text, or err
// itself if its text does not name the user.
func (s *Store) noUser(err error) error {
	return cutUser(err, s.cfg.ConnConfig.User)
}

// cutUser returns err with user cut from its text: a *pgconn.ConnectError
// in its chain is told again without the user, and the name the server
// quotes after "user" or "role" becomes [redacted]. The error's chain is
// kept for errors.Is and errors.As.
func cutUser(err error, user string) error {
	if err == nil || user == "" {
		return err
	}
	text := err.Error()
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) && ce.Config != nil {
		inner := ""
		if e := ce.Unwrap(); e != nil {
			inner = " " + e.Error()
		}
		text = strings.Replace(text, ce.Error(), fmt.Sprintf("failed to connect to `database=%s`:%s", ce.Config.Database, inner), 1)
	}
	for _, q := range []string{`user "`, `role "`} {
		text = strings.ReplaceAll(text, q+user+`"`, q+"[redacted]"+`"`)
	}
	if text == err.Error() {
		return err
	}
	return &userCut{text: text, err: err}
}

// userCut is an error whose text cutUser rewrote.
type userCut struct {
	text string
	err  error
}

func (e *userCut) Error() string { return e.text }
func (e *userCut) Unwrap() error { return e.err }

// Where names the database of the connection string dsn as the store's
// messages do, for a caller's own: postgres://host:port/database, without
// the user and the password (a string that does not parse: as
// [log.RedactURL] shows it, without a user).
func Where(dsn string) string {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return shownDSN(dsn)
	}
	return where(cfg)
}

// where names the database for messages: host, port and database, without
// the user and the password.
func where(cfg *pgconn.Config) string {
	return fmt.Sprintf("postgres://%s:%d/%s", cfg.Host, cfg.Port, cfg.Database)
}

// shownDSN is dsn as [log.RedactURL] shows a URL, without a user.
func shownDSN(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		u.User = nil
		dsn = u.String()
	}
	return log.RedactURL(dsn)
}

// parseFailure is the error of a connection string that does not parse:
// pgx's, which shows the string without its password, shown without the
// user name too (shownDSN).
func parseFailure(dsn string, err error) error {
	var pe *pgconn.ParseConfigError
	if !errors.As(err, &pe) {
		return err
	}
	c := *pe
	c.ConnString = shownDSN(dsn)
	return &c
}
